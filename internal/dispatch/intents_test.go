package dispatch_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// forgeResult stores, on the call's result subject, the call's own result
// with its intents replaced by in: what a worker credential can publish.
func forgeResult(t *testing.T, s *dispatchtest.Stack, real *toolwirev1.ToolResponse, in ...*toolwirev1.Intent) {
	t.Helper()
	forged := proto.Clone(real).(*toolwirev1.ToolResponse)
	forged.Intents = in
	data, err := proto.Marshal(forged)
	require.NoError(t, err)
	b := s.Env.Open(t, "forger")
	subject := b.Subjects.Result(identity.Default.Tenant, s.Dispatcher.Config().Name, real.CallId)
	_, err = b.JS.Publish(t.Context(), subject, data)
	require.NoError(t, err)
}

func setState(id, key string) *toolwirev1.Intent {
	return &toolwirev1.Intent{Id: id, Type: intents.SetState, PayloadJson: `{"key":"` + key + `","value":true}`}
}

// A stored result carrying an intent its tool never declared (a forged
// SET_STATE on sleep, which declares none) changes nothing at apply: the
// intent is refused, with its reason in the session's log.
func TestApplyIntentsRefusesUndeclared(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: "s1"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	forgeResult(t, s, r.Response, setState("i1", "owned"))

	for round := range 2 {
		ar, err := s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
		require.NoError(t, err)
		require.Zero(t, ar.Applied)
		require.Len(t, ar.Refused, 1)
		require.Equal(t, "i1", ar.Refused[0].IntentId)
		require.Contains(t, ar.Refused[0].Refused, "not declared by the tool (declared: none)")
		sess, err := s.Dispatcher.GetSession(ctx, id, "s1")
		require.NoError(t, err)
		require.Empty(t, sess.StateJson, "an undeclared SET_STATE changed the session")
		require.False(t, sess.Ended)
		require.Len(t, sess.Log, 1, "round %d: the refusal is recorded once", round)
		require.Equal(t, ar.Refused[0].Refused, sess.Log[0].Refused)
		require.Equal(t, intents.SetState, sess.Log[0].Type)
	}
}

// Where a tool declares some intents, the declared, valid ones of a result
// apply and the rest are refused; a result naming a spec version the
// registry does not hold has every intent refused.
func TestApplyIntentsAppliesOnlyWhatTheSpecDeclares(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"a","value":1}`, Session: "s2"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	forgeResult(t, s, r.Response, setState("i1", "b"), &toolwirev1.Intent{Id: "i2", Type: intents.EndSession})

	ar, err := s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
	require.NoError(t, err)
	require.Equal(t, int32(1), ar.Applied)
	require.Len(t, ar.Refused, 1)
	require.Equal(t, intents.EndSession, ar.Refused[0].Type)
	require.Contains(t, ar.Refused[0].Refused, "not declared by the tool (declared: SET_STATE)")
	require.Equal(t, map[string]string{"b": "true"}, ar.Session.StateJson)
	require.False(t, ar.Session.Ended)

	r2, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"c","value":1}`, Session: "s2"}, 30*time.Second)
	require.NoError(t, err)
	other := proto.Clone(r2.Response).(*toolwirev1.ToolResponse)
	other.Meta.SpecVersion = "not-a-version"
	forgeResult(t, s, other, setState("i1", "c"))
	ar, err = s.Dispatcher.ApplyIntents(ctx, id, r2.CallId)
	require.NoError(t, err)
	require.Zero(t, ar.Applied)
	require.Len(t, ar.Refused, 1)
	require.Contains(t, ar.Refused[0].Refused, `spec version "not-a-version" of tool "remember" is not in the registry`)
	require.Equal(t, map[string]string{"b": "true"}, ar.Session.StateJson)
}

// Call with apply_intents checks the intents of the result it waited for
// as ApplyIntents does: a SET_STATE stored for a running sleep call is
// refused, and the call's answer says so.
func TestCallApplyIntentsRefusesUndeclared(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	calls := make(chan *nats.Msg, 1)
	sub, err := s.Env.Bus.NC.ChanSubscribe(s.Env.Bus.Subjects.AllCalls(), calls)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, s.Env.Bus.NC.Flush())

	type answer struct {
		r   *toolwirev1.CallResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1m"}`, Session: "s3",
			ApplyIntents: true}, 30*time.Second)
		done <- answer{r, err}
	}()
	var call toolwirev1.ToolCall
	select {
	case m := <-calls:
		require.NoError(t, proto.Unmarshal(m.Data, &call))
	case <-time.After(30 * time.Second):
		t.Fatal("the call was never published")
	}
	forgeResult(t, s, &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Ok: true, Tool: call.Tool,
		Meta: &toolwirev1.ResponseMeta{SpecVersion: call.SpecVersion, Session: "s3", Source: "worker"}}, setState("i1", "owned"))
	a := <-done
	require.NoError(t, a.err)
	require.Empty(t, a.r.ApplyError)
	require.Len(t, a.r.RefusedIntents, 1)
	require.Contains(t, a.r.RefusedIntents[0].Refused, "not declared by the tool (declared: none)")
	require.Empty(t, a.r.Session.StateJson)
	require.Len(t, a.r.Session.Log, 1)
}
