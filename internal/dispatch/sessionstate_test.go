package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func echoIn(ctx context.Context, t *testing.T, s *dispatchtest.Stack, session string) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`,
		Session: session}, 30*time.Second)
	require.NoError(t, err)
	return r.Response
}

// A call in a session that END_SESSION ended is refused SESSION_INACTIVE
// before anything runs or is queued, recorded like any refusal; a session the
// dispatcher had seen active learns of its end from its watch; another
// session is not touched.
func TestEndedSessionIsRefused(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()

	// Never seen by the dispatcher: read from the bucket.
	s.EndSession(t, "s-cold", "caller hung up")
	before, err := s.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	r := echoIn(ctx, t, s, "s-cold")
	require.False(t, r.GetOk())
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "caller hung up")
	after, err := s.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, before.State.LastSeq, after.State.LastSeq, "nothing was queued")
	stored, err := s.Dispatcher.GetResult(ctx, identity.Default, r.GetCallId(), 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, stored.GetResponse().GetError().GetType(), "the refusal is recorded")

	// Seen active, then ended elsewhere: the watch brings the end.
	require.True(t, echoIn(ctx, t, s, "s-warm").GetOk())
	s.EndSession(t, "s-warm", "caller hung up")
	require.Eventually(t, func() bool {
		return echoIn(ctx, t, s, "s-warm").GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE
	}, 20*time.Second, 10*time.Millisecond)

	// Another replica knows too.
	other := s.StartDispatcher(t, dispatch.Config{})
	r2, err := other.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{}`, Session: "s-warm"}, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r2.GetResponse().GetError().GetType())

	require.True(t, echoIn(ctx, t, s, "s-live").GetOk(), "a live session runs")
	require.True(t, echoIn(ctx, t, s, "").GetOk(), "a call without a session runs")

	// A session's name is stored and cached: bounded.
	long := echoIn(ctx, t, s, strings.Repeat("s", dispatch.MaxSessionBytes+1))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, long.GetError().GetType())
	require.Contains(t, long.GetError().GetMessage(), "at most 256 bytes")
	require.True(t, echoIn(ctx, t, s, strings.Repeat("s", dispatch.MaxSessionBytes)).GetOk())
	// So do the session RPCs: no session opened that no call could name.
	_, err = s.Dispatcher.SetSessionMode(ctx, identity.Default, strings.Repeat("s", dispatch.MaxSessionBytes+1), "")
	require.ErrorIs(t, err, dispatch.ErrBadSession)
	_, err = s.Dispatcher.EndSession(ctx, identity.Default, strings.Repeat("s", dispatch.MaxSessionBytes+1), "")
	require.ErrorIs(t, err, dispatch.ErrBadSession)
}

const modesPolicy = `
tenant:
  default: allow
modes:
  voice:
    rules:
      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses on a call}
  text: {}
`

// A session's mode, set by the orchestrator, is a layer of the policy: a
// call the mode forbids is refused MODE_RESTRICTED naming the mode and the
// rule, the same call in another session runs, and the call carries the
// mode (caller.mode); a mode the policy does not declare is refused.
func TestModeRestrictsTheSession(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(ctx, policystore.Installation, []byte(modesPolicy), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(ctx, policystore.Installation, a.Version.Version, a.Revision))
	sleep := func(session string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: session}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	require.True(t, sleep("s-voice").GetOk(), "no mode yet")

	sess, err := s.Dispatcher.SetSessionMode(ctx, id, "s-voice", "voice")
	require.NoError(t, err)
	require.Equal(t, "voice", sess.GetMode())
	r := sleep("s-voice")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `mode "voice" forbids this call of "sleep" (rule "voice-no-sleep"): no pauses on a call`)
	require.True(t, sleep("s-other").GetOk(), "another session is not in the mode")
	require.True(t, echoIn(ctx, t, s, "s-voice").GetOk(), "what the mode allows runs")

	_, err = s.Dispatcher.SetSessionMode(ctx, id, "s-voice", "shout")
	require.ErrorIs(t, err, dispatch.ErrUnknownMode)
	_, err = s.Dispatcher.SetSessionMode(ctx, identity.Identity{Tenant: id.Tenant, Agent: "bot", Scopes: []string{"tools"}}, "s-voice", "text")
	require.ErrorIs(t, err, dispatch.ErrNotAdmin)

	// SET_MODE written by an orchestrator's applier reaches the view by its watch.
	_, err = intents.NewApplier(s.Env.Bus.Sessions, intents.ApplierConfig{}).Apply(ctx, id.Tenant, "s-voice", intents.Response{CallID: "orch-1", SetsMode: true,
		Intents: []*toolwirev1.Intent{{Id: "m", Type: intents.SetMode, PayloadJson: `{"mode":"text"}`}},
		Spec:    &toolwirev1.ToolSpec{Name: "orchestrator", Intents: []string{intents.SetMode}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sleep("s-voice").GetOk() }, 20*time.Second, 10*time.Millisecond)

	// A mode the policy no longer declares fails closed.
	_, err = intents.NewApplier(s.Env.Bus.Sessions, intents.ApplierConfig{}).Apply(ctx, id.Tenant, "s-gone", intents.Response{CallID: "orch-2", SetsMode: true,
		Intents: []*toolwirev1.Intent{{Id: "m", Type: intents.SetMode, PayloadJson: `{"mode":"retired"}`}},
		Spec:    &toolwirev1.ToolSpec{Name: "orchestrator", Intents: []string{intents.SetMode}}})
	require.NoError(t, err)
	r = echoIn(ctx, t, s, "s-gone")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), `"retired" is not one the policy in force declares`)
}

// The tools of a session (VisibleToolsIn) leave out those its mode
// forbids outright, and every tool when the policy does not declare its
// mode (admission refuses every call in it); another session, or none,
// sees them all.
func TestModeHidesToolsOfTheSession(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	s.ApplyPolicy(t, modesPolicy)
	s.SetMode(t, "s-voice", "voice")
	names := func(session string) []string {
		specs, err := s.Dispatcher.VisibleToolsIn(ctx, id, registry.Filter{}, session)
		require.NoError(t, err)
		var out []string
		for _, sp := range specs {
			out = append(out, sp.GetName())
		}
		return out
	}
	require.Equal(t, []string{"echo", "fail", "remember"}, names("s-voice"))
	require.Contains(t, names("s-other"), "sleep")
	require.Contains(t, names(""), "sleep")

	_, err := intents.NewApplier(s.Env.Bus.Sessions, intents.ApplierConfig{}).Apply(ctx, id.Tenant, "s-gone", intents.Response{CallID: "orch-1", SetsMode: true,
		Intents: []*toolwirev1.Intent{{Id: "m", Type: intents.SetMode, PayloadJson: `{"mode":"retired"}`}},
		Spec:    &toolwirev1.ToolSpec{Name: "orchestrator", Intents: []string{intents.SetMode}}})
	require.NoError(t, err)
	require.Empty(t, names("s-gone"), "an undeclared mode fails closed")
}

// A tool's SET_MODE intent, applied by an agent without the admin scope,
// is refused and recorded: an agent cannot lift its own session's mode
// through a tool (a worker's word); applied by an admin it is.
func TestSetModeIntentNeedsTheAuthorityToSetModes(t *testing.T) {
	t.Parallel()
	lift := tool.Must(tool.New("lift", func(ctx context.Context, _ struct{}) (string, error) {
		return "lifted", tool.EmitIntent(ctx, intents.SetMode, map[string]string{"mode": "text"})
	}, tool.WithIntents(intents.SetMode)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), lift)})
	s.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep]}\n  text: {}\n")
	s.SetMode(t, "s1", "voice")
	agent := identity.Identity{Tenant: identity.Default.Tenant, Agent: "bot", Scopes: []string{"tools"}}
	r, err := s.Dispatcher.Call(t.Context(), agent, &toolwirev1.CallRequest{Tool: "lift", ArgumentsJson: `{}`, Session: "s1", ApplyIntents: true}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), r.Response.GetError().GetMessage())
	sleep := func() *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(t.Context(), agent, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: "s1"}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, sleep().GetError().GetType(), "the agent's SET_MODE was refused")
	out, err := s.Dispatcher.ApplyIntents(t.Context(), identity.Default, r.CallId)
	require.NoError(t, err)
	require.EqualValues(t, 1, out.Applied, "an admin applies it")
	require.Eventually(t, func() bool { return sleep().GetOk() }, 30*time.Second, 20*time.Millisecond)
}
