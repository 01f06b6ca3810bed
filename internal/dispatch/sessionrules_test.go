package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// sessionRulesPolicy restricts voice sessions and sets the policy's
// session rules.
const sessionRulesPolicy = `
tenant:
  default: allow
modes:
  voice:
    rules:
      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses on a call}
  text: {}
sessions:
`

// sleepIn calls sleep in session ("" = none) as the default identity.
func sleepIn(t *testing.T, s *dispatchtest.Stack, session string) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`,
		Session: session}, 30*time.Second)
	require.NoError(t, err)
	return r.Response
}

// Under sessions.required a call naming no session is refused
// PERMISSION_DENIED naming the rule, and the refusal is recorded; a call
// naming one runs.
func TestSessionRequired(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, sessionRulesPolicy+"  required: true\n")
	r := echoIn(t.Context(), t, s, "")
	require.False(t, r.GetOk())
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "sessions.required")
	require.Contains(t, r.GetError().GetSuggestion(), "io.toolwire/session")
	stored, err := s.Dispatcher.GetResult(t.Context(), identity.Default, r.GetCallId(), 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, stored.GetResponse().GetError().GetType(), "the refusal is recorded")
	require.True(t, echoIn(t.Context(), t, s, "s-any").GetOk(), "a call naming a session runs")
}

// Under sessions.opened_only a call naming a session nobody opened is
// refused SESSION_INACTIVE saying how to open it; once the orchestrator
// opens it (SetSessionMode, an empty mode included) its calls run.
func TestSessionOpenedOnly(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, sessionRulesPolicy+"  opened_only: true\n")
	r := echoIn(t.Context(), t, s, "s-fresh")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `session "s-fresh" was never opened`)
	require.Contains(t, r.GetError().GetSuggestion(), "toolctl session mode")

	s.SetMode(t, "s-fresh", "") // opened, without a mode
	require.True(t, echoIn(t.Context(), t, s, "s-fresh").GetOk(), "an opened session runs")
	s.SetMode(t, "s-voice", "voice")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, sleepIn(t, s, "s-voice").GetError().GetType())
	require.True(t, echoIn(t.Context(), t, s, "").GetOk(), "without required, a call naming no session runs")

	s.EndSession(t, "s-ended", "bye")
	require.Contains(t, echoIn(t.Context(), t, s, "s-ended").GetError().GetMessage(), "has ended", "an ended session is ended, not unopened")
}

// Under sessions.default_mode a call without a session, and a call in a
// session without a mode, are decided in the default mode
// (MODE_RESTRICTED) and do not list the tools it hides; a session the
// orchestrator put in another mode is in that one.
func TestSessionDefaultMode(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, sessionRulesPolicy+"  default_mode: voice\n")
	for _, session := range []string{"", "s-nomode"} {
		r := sleepIn(t, s, session)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType(), "session %q: %v", session, r.GetError())
		require.Contains(t, r.GetError().GetMessage(), `mode "voice" forbids this call of "sleep"`)
		require.True(t, echoIn(t.Context(), t, s, session).GetOk())
		require.NotContains(t, visibleNames(t, s, session), "sleep", "session %q", session)
		require.Contains(t, visibleNames(t, s, session), "echo")
	}
	require.NotContains(t, names(s.Dispatcher.VisibleTools(identity.Default, registry.Filter{})), "sleep")
	_, err := s.Dispatcher.VisibleTool(t.Context(), identity.Default, "sleep", "")
	require.ErrorIs(t, err, registry.ErrNotFound)

	s.SetMode(t, "s-text", "text")
	require.True(t, sleepIn(t, s, "s-text").GetOk(), "the session's own mode, not the default")
	require.Contains(t, visibleNames(t, s, "s-text"), "sleep")
}

// Without the section nothing changes: a call without a session, or in a
// fresh session, runs unrestricted and lists every tool.
func TestNoSessionRules(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, sessionRulesPolicy+"  {}\n")
	for _, session := range []string{"", "s-fresh"} {
		require.True(t, sleepIn(t, s, session).GetOk(), "session %q", session)
		require.Contains(t, visibleNames(t, s, session), "sleep")
	}
}

func visibleNames(t *testing.T, s *dispatchtest.Stack, session string) []string {
	t.Helper()
	specs, err := s.Dispatcher.VisibleToolsIn(t.Context(), identity.Default, registry.Filter{}, session)
	require.NoError(t, err)
	return names(specs)
}

func names(specs []*toolwirev1.ToolSpec) []string {
	var out []string
	for _, sp := range specs {
		out = append(out, sp.GetName())
	}
	return out
}
