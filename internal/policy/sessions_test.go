package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The sessions section: its fields parse, unknown ones and a default
// mode the document does not declare are refused, it changes the
// version, and the document's tests run in the default mode.
func TestSessionRules(t *testing.T) {
	t.Parallel()
	const doc = `
tenant: {default: allow}
modes:
  voice:
    rules:
      - {id: voice-no-rm, effect: deny, tools: [rm]}
sessions:
  required: true
  opened_only: true
  default_mode: voice
tests:
  - {tool: rm, expect: deny}
  - {tool: rm, caller: {mode: voice}, expect: deny}
`
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, policy.SessionRules{Required: true, OpenedOnly: true, DefaultMode: "voice"}, p.Sessions())
	require.Equal(t, "required, opened_only, default_mode voice", p.Sessions().String())
	require.NoError(t, p.RunTests(nil), "a test without a mode runs in the default mode")
	require.Equal(t, "voice", p.Sessions().ModeOf(""))
	require.Equal(t, "plan", p.Sessions().ModeOf("plan"))
	require.Contains(t, string(p.Canonical()), `"sessions":{"default_mode":"voice","opened_only":true,"required":true}`)

	plain, err := policy.Parse([]byte("tenant: {default: allow}\nsessions: {}\n"))
	require.NoError(t, err)
	require.True(t, plain.Sessions().IsZero())
	require.Equal(t, "", plain.Sessions().Explain("", "", false))
	none, err := policy.Parse([]byte("tenant: {default: allow}\n"))
	require.NoError(t, err)
	require.Equal(t, none.Version(), plain.Version(), "an empty section is no section")
	require.True(t, (*policy.Policy)(nil).Sessions().IsZero())

	for name, tc := range map[string]struct{ doc, want string }{
		"unknown field":   {"sessions: {required: true, pinned: true}\n", "sessions.pinned: unknown field"},
		"not a boolean":   {"sessions: {required: yes}\n", "sessions.required: must be true or false"},
		"undeclared mode": {"sessions: {default_mode: voice}\n", `sessions.default_mode: mode "voice" is not declared`},
		"bad mode name":   {"sessions: {default_mode: \"9 lives\"}\n", "is not a mode name"},
		"not a mapping":   {"sessions: true\n", "sessions: must be a mapping"},
	} {
		_, err := policy.Parse([]byte("tenant: {default: allow}\n" + tc.doc))
		require.ErrorIs(t, err, policy.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// Explain's note says what the section does to the call explained.
func TestSessionRulesExplain(t *testing.T) {
	t.Parallel()
	r := policy.SessionRules{Required: true, OpenedOnly: true, DefaultMode: "voice"}
	require.Contains(t, r.Explain("", "voice", true), "names no session: admission refuses it")
	require.Contains(t, r.Explain("", "voice", true), "decided in mode voice (sessions.default_mode")
	require.Contains(t, r.Explain("s-1", "plan", false), `unless session "s-1" was opened`)
	require.NotContains(t, r.Explain("s-1", "plan", false), "default_mode:")
}

// sessions.pin_versions in any layer that applies to a caller turns
// pinning on for it; false is the same as leaving it out; the setting is
// part of the canonical form (a new version); a wrong value is refused.
func TestPinVersions(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`
tenant:
  default: allow
  sessions: {pin_versions: false}
agents:
  voice-bot:
    sessions: {pin_versions: true}
modes:
  voice:
    sessions:
      pin_versions: true
  text: {}
`))
	require.NoError(t, err)
	require.True(t, p.PinsAnyVersions())
	for _, c := range []struct {
		caller *toolwirev1.Caller
		want   bool
	}{
		{&toolwirev1.Caller{Tenant: "t"}, false},
		{&toolwirev1.Caller{Tenant: "t", Mode: "text"}, false},
		{&toolwirev1.Caller{Tenant: "t", Mode: "voice"}, true},
		{&toolwirev1.Caller{Tenant: "t", Agent: "voice-bot"}, true},
		{&toolwirev1.Caller{Tenant: "t", Agent: "voice-bot", Mode: "text"}, true},
	} {
		require.Equal(t, c.want, p.PinsVersions(c.caller), "%v", c.caller)
	}

	plain, err := policy.Parse([]byte("tenant: {default: allow}\n"))
	require.NoError(t, err)
	require.False(t, plain.PinsAnyVersions())
	require.False(t, (*policy.Policy)(nil).PinsVersions(&toolwirev1.Caller{}))
	off, err := policy.Parse([]byte("tenant: {default: allow, sessions: {pin_versions: false}}\n"))
	require.NoError(t, err)
	require.Equal(t, plain.Version(), off.Version(), "false is the default")
	on, err := policy.Parse([]byte("tenant: {default: allow, sessions: {pin_versions: true}}\n"))
	require.NoError(t, err)
	require.NotEqual(t, plain.Version(), on.Version())
	require.True(t, on.PinsVersions(&toolwirev1.Caller{Tenant: "t"}))

	_, err = policy.Parse([]byte("tenant: {sessions: {pin_versions: yes}}\n"))
	require.ErrorContains(t, err, "tenant.sessions.pin_versions")
	_, err = policy.Parse([]byte("tenant: {sessions: {pin: true}}\n"))
	require.ErrorContains(t, err, "unknown field")
}
