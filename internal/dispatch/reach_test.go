package dispatch_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Two agents and the admin of tenant ta.
var (
	bot   = identity.Identity{Tenant: "ta", Agent: "bot-a", Scopes: []string{"tools"}}
	bot2  = identity.Identity{Tenant: "ta", Agent: "bot-a2", Scopes: []string{"tools"}}
	admin = identity.Identity{Tenant: "ta", Agent: "ops-a", Scopes: []string{"*"}}
)

var own = dispatch.Config{AgentVisibility: identity.VisibilityOwn}

// Under --agent-visibility own an idempotency key is the agent's: another
// agent of the tenant repeating it, with the same arguments or others,
// makes a call of its own, never handed the first agent's call id or
// result (Call and Submit alike). Under tenant (the default) the key is
// the tenant's, as before.
func TestIdempotencyKeyIsTheAgentsUnderOwn(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: own})
	d := s.Dispatcher
	req := func(key, text string) *toolwirev1.CallRequest {
		return &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"` + text + `"}`, IdempotencyKey: key}
	}
	first := callNow(t, d, bot, req("k1", "bot's"))
	again, err := d.Call(t.Context(), bot, req("k1", "bot's"), 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, first.CallId, again.CallId, "the agent's own repeat is a duplicate")

	// bot2 repeating bot's key and arguments: a call of its own.
	other, err := d.Call(t.Context(), bot2, req("k1", "bot's"), 30*time.Second)
	require.NoError(t, err)
	require.NotEqual(t, first.CallId, other.CallId, "another agent's key is another key")
	require.True(t, other.Response.GetOk(), "%v", other.Response.GetError())
	sub, err := d.Submit(t.Context(), bot2, req("k1", "bot's"))
	require.NoError(t, err)
	require.Equal(t, other.CallId, sub.CallID, "bot2's own repeat")
	require.True(t, sub.Duplicate)
	// Submit as bot2 first: not handed bot's call either.
	first2 := callNow(t, d, bot, req("k2", "bot's"))
	sub, err = d.Submit(t.Context(), bot2, req("k2", "bot's"))
	require.NoError(t, err)
	require.NotEqual(t, first2.CallId, sub.CallID)
	require.False(t, sub.Duplicate)

	// bot2 with other arguments under bot's key: no CONFLICT naming bot's
	// call, a call of its own.
	callNow(t, d, bot, req("k3", "bot's"))
	diff := callNow(t, d, bot2, req("k3", "bot2's"))
	require.True(t, diff.GetOk(), "%v", diff.GetError())
	// The agent's own key with other arguments: CONFLICT, naming its call.
	conflict := callNow(t, d, bot, req("k1", "other"))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, conflict.GetError().GetType())
	require.Contains(t, conflict.GetError().GetMessage(), first.CallId)

	// Under tenant the key is the tenant's: another agent's repeat is a
	// duplicate of the first call.
	tenant := dispatchtest.Start(t, dispatchtest.Options{})
	a := callNow(t, tenant.Dispatcher, bot, req("k1", "shared"))
	b, err := tenant.Dispatcher.Call(t.Context(), bot2, req("k1", "shared"), 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, a.CallId, b.CallId)
}

// Under own, continuing another agent's call answers exactly as
// continuing a made-up id: nothing of the call (that it did not ask for
// input, its tool) is told.
func TestContinuesAnotherAgentsCallIsAMadeUpIdUnderOwn(t *testing.T) {
	t.Parallel()
	var acts atomic.Int64
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: own, Tools: append(builtin.Tools(), askTool(&acts))})
	d := s.Dispatcher
	done := callNow(t, d, bot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`})
	asked := callNow(t, d, bot, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"go"}`})
	require.NotNil(t, asked.GetInputRequired())
	madeUp := "01HZZZZZZZZZZZZZZZZZZZZZZZ"
	argsOf := map[string]string{"ask": `{"msg":"go"}`, "echo": `{"text":"hi"}`}
	answer := func(id identity.Identity, tool, continues string) string {
		r := callNow(t, d, id, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: argsOf[tool], Continues: continues, InputResponsesJson: accept})
		return strings.ReplaceAll(r.GetError().GetMessage(), continues, "ID")
	}
	for _, c := range []struct{ tool, id string }{{"ask", done.CallId}, {"echo", asked.CallId}, {"ask", asked.CallId}} {
		want := answer(bot2, c.tool, madeUp)
		require.Contains(t, want, "no finished call ID")
		require.Equal(t, want, answer(bot2, c.tool, c.id), "bot2 continuing bot's call %s as %s", c.id, c.tool)
	}
	require.Zero(t, acts.Load(), "bot2 continued nothing")
	require.True(t, callNow(t, d, bot, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"go"}`, Continues: asked.CallId, InputResponsesJson: accept}).GetOk())
	require.Equal(t, int64(1), acts.Load(), "bot continues its own call")
}

// CallArguments (how the MCP face gets a redacted task's arguments back)
// answers a call outside the caller's reach as one not stored.
func TestCallArgumentsOfAnotherAgentsCallUnderOwn(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: own})
	d := s.Dispatcher
	r := callNow(t, d, bot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"secret"}`})
	args, err := d.CallArguments(t.Context(), bot, "echo", r.CallId)
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"secret"}`, string(args))
	_, err = d.CallArguments(t.Context(), admin, "echo", r.CallId)
	require.NoError(t, err)
	_, err = d.CallArguments(t.Context(), bot2, "echo", r.CallId)
	require.ErrorIs(t, err, dispatch.ErrCallNotStored)
}

// The agent a call is placed with when its stored call is not found (a
// call refused at admission, or past the calls stream's retention) is
// the one its admission events name, never the agent of a later event:
// the tenant's admin cancelling the call (a CANCEL_REQUESTED event, the
// newest, carrying the admin) leaves it its agent's.
func TestCancelByAdminLeavesTheCallItsAgentsUnderOwn(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Tools: builtin.Tools(), Dispatcher: own})
	w := s.StartWorker(t, builtin.Tools()...) // registers the tools, then serves none
	require.NoError(t, w.Stop(t.Context()))
	s.WaitTool(t, "sleep")
	ctx := t.Context()
	sub, err := s.Dispatcher.Submit(ctx, bot, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1m"}`})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	require.Eventually(t, func() bool { // its admission record is stored
		agent, err := dispatch.AgentOfEvents(ctx, s.Dispatcher, "ta", sub.CallID)
		return err == nil && agent == "bot-a"
	}, 30*time.Second, 20*time.Millisecond)
	outcome, err := s.Dispatcher.Cancel(ctx, admin, sub.CallID, "by the admin")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, outcome)
	agent, err := dispatch.AgentOfEvents(ctx, s.Dispatcher, "ta", sub.CallID)
	require.NoError(t, err)
	require.Equal(t, "bot-a", agent)
	g, err := s.Dispatcher.GetResult(ctx, bot, sub.CallID, 0)
	require.NoError(t, err, "bot still sees its call")
	require.NotEqual(t, toolwirev1.CallState_CALL_STATE_UNKNOWN, g.State)
}

// A session is the tenant's (named by its callers, shared by every agent
// that names it), but under own its log shows a key only the entries of
// calls it may see.
func TestSessionLogIsFilteredUnderOwn(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: own})
	d := s.Dispatcher
	remember := func(id identity.Identity, key string) string {
		r, err := d.Call(t.Context(), id, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"` + key + `","value":1}`,
			Session: "s1", ApplyIntents: true}, 30*time.Second)
		require.NoError(t, err)
		require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
		require.Empty(t, r.ApplyError)
		return r.CallId
	}
	mine, theirs := remember(bot, "a"), remember(bot2, "b")
	logOf := func(id identity.Identity) []string {
		sess, err := d.GetSession(t.Context(), id, "s1")
		require.NoError(t, err)
		var ids []string
		for _, e := range sess.GetLog() {
			ids = append(ids, e.GetCallId())
		}
		return ids
	}
	require.Equal(t, []string{mine}, logOf(bot))
	require.Equal(t, []string{theirs}, logOf(bot2))
	require.Equal(t, []string{mine, theirs}, logOf(admin))
}

// Under tenant (the default) nothing asks whose a call is, so admission
// remembers no call's agent; under own it does.
func TestOwnersAreRememberedUnderOwnOnly(t *testing.T) {
	t.Parallel()
	for _, v := range []identity.Visibility{identity.VisibilityTenant, identity.VisibilityOwn} {
		s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: dispatch.Config{AgentVisibility: v}})
		callNow(t, s.Dispatcher, bot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`})
		if v == identity.VisibilityOwn {
			require.Equal(t, 1, dispatch.RememberedOwners(s.Dispatcher))
		} else {
			require.Zero(t, dispatch.RememberedOwners(s.Dispatcher))
		}
	}
}
