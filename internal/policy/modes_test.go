package policy_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const modesDoc = `
tenant:
  default: allow
  rules:
    - {id: no-rm, effect: deny, tools: [rm]}
modes:
  voice:
    rules:
      - {id: voice-no-write, effect: deny, tools: [fs_write, rm], reason: not while speaking}
  plan:
    default: deny
    rules:
      - {id: plan-reads, effect: allow, tools: [fs_read, search]}
  text: {}
tests:
  - {tool: fs_write, caller: {mode: voice}, expect: deny}
  - {tool: fs_write, caller: {mode: text}, expect: allow}
  - {tool: echo, when_mode_note: x, expect: allow}
`

// A mode's layer applies to the calls of sessions in that mode, composed
// with the tenant and agent layers (deny wins); a deny that is the
// mode's says so (ModeRestricted), one the tenant makes first does not;
// the tools a mode denies outright are hidden in that mode only.
func TestModes(t *testing.T) {
	t.Parallel()
	_, err := policy.Parse([]byte(modesDoc))
	require.ErrorContains(t, err, "when_mode_note", "an unknown test field is refused")
	p, err := policy.Parse([]byte(strings.Replace(modesDoc, "when_mode_note: x, ", "", 1)))
	require.NoError(t, err)
	require.Equal(t, []string{"plan", "text", "voice"}, p.Modes())
	require.True(t, p.HasMode("voice"))
	require.False(t, p.HasMode("shout"))
	require.NoError(t, p.RunTests(nil))

	decide := func(tool, mode string) policy.Decision {
		return p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: tool}, Caller: &toolwirev1.Caller{Tenant: "t", Session: "s", Mode: mode}})
	}
	d := decide("fs_write", "voice")
	require.Equal(t, policy.Deny, d.Outcome)
	mode, rule, ok := d.ModeRestricted()
	require.True(t, ok)
	require.Equal(t, "voice", mode)
	require.Equal(t, "voice-no-write", rule)
	require.Equal(t, "not while speaking", d.Reason())

	require.Equal(t, policy.Allow, decide("fs_write", "").Outcome, "no mode: the mode layers do not apply")
	require.Equal(t, policy.Allow, decide("fs_write", "text").Outcome)

	d = decide("rm", "voice")
	_, _, ok = d.ModeRestricted()
	require.False(t, ok, "the tenant's deny comes first: PERMISSION_DENIED, not the mode's")

	d = decide("echo", "plan")
	require.Equal(t, policy.Deny, d.Outcome)
	mode, rule, ok = d.ModeRestricted()
	require.True(t, ok)
	require.Equal(t, "plan", mode)
	require.Empty(t, rule)
	require.Contains(t, d.Reason(), "not allowed in mode plan")
	require.Equal(t, policy.Allow, decide("fs_read", "plan").Outcome)

	caller := func(mode string) *toolwirev1.Caller { return &toolwirev1.Caller{Tenant: "t", Mode: mode} }
	require.True(t, p.Hidden("fs_write", caller("voice")))
	require.False(t, p.Hidden("fs_write", caller("text")))
	require.False(t, p.Hidden("fs_write", caller("")))
	require.True(t, p.Hidden("echo", caller("plan")))

	x := p.Explain(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "fs_write"}, Caller: caller("voice")})
	require.Contains(t, x.Layers, "mode voice (no default)")
}

// caller.mode is in CEL; a mode's name is checked.
func TestModeInCEL(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte("tenant:\n  rules:\n    - {id: quiet, effect: deny, tools: [\"*\"], when: 'caller.mode == \"voice\" && tool.name == \"shout\"'}\n"))
	require.NoError(t, err)
	d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "shout"}, Caller: &toolwirev1.Caller{Mode: "voice"}})
	require.Equal(t, policy.Deny, d.Outcome)
	_, _, ok := d.ModeRestricted()
	require.False(t, ok, "a tenant rule reading caller.mode is the tenant's deny")

	_, err = policy.Parse([]byte("modes:\n  \"no spaces\": {default: deny}\n"))
	require.ErrorContains(t, err, "is not a mode name")
}
