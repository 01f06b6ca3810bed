package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// forgeResult stores, on the call's result subject and in place of its
// result, the call's own result with its intents replaced by in, signed
// with a key the dispatchers
// believe (theirs): what a worker whose enrolled key is taken over can
// publish for its pool's calls (a result signed with any other key is
// never an answer: answers_test.go).
func forgeResult(t *testing.T, s *dispatchtest.Stack, real *toolwirev1.ToolResponse, in ...*toolwirev1.Intent) {
	t.Helper()
	forged := proto.Clone(real).(*toolwirev1.ToolResponse)
	forged.Intents = in
	data, err := proto.Marshal(forged)
	require.NoError(t, err)
	b := s.Env.Open(t, "forger")
	subject := b.Subjects.Result(identity.Default.Tenant, s.Dispatcher.Config().Name, real.CallId)
	// In place of the real result (the first believed result is the
	// answer): deleted, as only a credential with every permission can.
	if stored, err := b.Results.GetLastMsgForSubject(t.Context(), subject); err == nil {
		require.NoError(t, b.Results.DeleteMsg(t.Context(), stored.Sequence))
	}
	msg := s.Env.Bus.Signer.SignedMsg(subject, signing.KindResult, real.CallId, real.GetMeta().GetAttempt(), data, nil)
	_, err = b.JS.PublishMsg(t.Context(), msg)
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
		require.Equal(t, intents.RefusedEntryID, sess.Log[0].IntentId)
		require.Equal(t, `1 intent refused; #1 (SET_STATE, id "i1"): `+ar.Refused[0].Refused, sess.Log[0].Refused)
	}
}

// Where a tool declares some intents, the declared, valid ones of a result
// apply and the rest are refused.
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

// rememberVersion is the spec version of remember, which declares
// SET_STATE: what a forger would name to get a SET_STATE through.
func rememberVersion(t *testing.T, s *dispatchtest.Stack) string {
	t.Helper()
	r := callNow(t, s.Dispatcher, identity.Default, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"v","value":1}`,
		Session: "elsewhere"})
	require.NotEmpty(t, r.GetMeta().GetSpecVersion())
	return r.GetMeta().GetSpecVersion()
}

// The spec version and session a result names are the forger's to
// choose: apply takes them from the stored call. A sleep call's result
// naming remember's spec version (which declares SET_STATE) and another
// session of the tenant has its SET_STATE refused, and neither session
// changes.
func TestApplyIntentsTakesToolVersionAndSessionFromTheCall(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	version := rememberVersion(t, s)
	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: "mine"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	forged := proto.Clone(r.Response).(*toolwirev1.ToolResponse)
	// (A result naming another tool than the call's is not its answer at
	// all: answers_test.go.)
	forged.Meta.SpecVersion, forged.Meta.Session = version, "victim"
	forgeResult(t, s, forged, setState("i1", "owned"))

	ar, err := s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
	require.NoError(t, err)
	require.Zero(t, ar.Applied)
	require.Len(t, ar.Refused, 1)
	require.Contains(t, ar.Refused[0].Refused, "not declared by the tool")
	require.Equal(t, "mine", ar.Session.Session, "the call's own session")
	require.Empty(t, ar.Session.StateJson)
	victim, err := s.Dispatcher.GetSession(ctx, id, "victim")
	require.NoError(t, err)
	require.Zero(t, victim.Revision, "the session the result named changed")

	// The result naming the call's own tool with another tool's version:
	// the version the call was admitted with is the one checked.
	forged.Tool = "sleep"
	r2, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: "mine"}, 30*time.Second)
	require.NoError(t, err)
	forged.CallId = r2.CallId
	forgeResult(t, s, forged, setState("i1", "owned"))
	ar, err = s.Dispatcher.ApplyIntents(ctx, id, r2.CallId)
	require.NoError(t, err)
	require.Zero(t, ar.Applied)
	require.Len(t, ar.Refused, 1)
	require.Contains(t, ar.Refused[0].Refused, "not declared by the tool (declared: none)")
}

// A tool that declares SET_STATE, its result naming another session: the
// intent applies to the call's own session, never to the one named.
func TestApplyIntentsNeverReachesAnotherSession(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"a","value":1}`, Session: "mine"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	forged := proto.Clone(r.Response).(*toolwirev1.ToolResponse)
	forged.Meta.Session = "victim"
	forgeResult(t, s, forged, setState("i1", "owned"))

	ar, err := s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
	require.NoError(t, err)
	require.Equal(t, int32(1), ar.Applied)
	require.Equal(t, "mine", ar.Session.Session)
	require.Equal(t, map[string]string{"owned": "true"}, ar.Session.StateJson)
	victim, err := s.Dispatcher.GetSession(ctx, id, "victim")
	require.NoError(t, err)
	require.Zero(t, victim.Revision, "the session the result named changed")
}

// Call with apply_intents applies to the session and against the spec
// version of the call it admitted: a result stored for a running sleep
// call that names remember's spec version and another session changes no
// session. (One that names another tool is not the call's answer at
// all: answers_test.go.)
func TestCallApplyIntentsUsesTheAdmittedCall(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	version := rememberVersion(t, s)
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
		r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1m"}`, Session: "mine",
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
	forgeResult(t, s, &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Ok: true, Tool: "sleep",
		Meta: &toolwirev1.ResponseMeta{SpecVersion: version, Session: "victim", Source: "worker"}}, setState("i1", "owned"))
	a := <-done
	require.NoError(t, a.err)
	require.Empty(t, a.r.ApplyError)
	require.Len(t, a.r.RefusedIntents, 1)
	require.Contains(t, a.r.RefusedIntents[0].Refused, "not declared by the tool")
	require.Equal(t, "mine", a.r.Session.Session)
	require.Empty(t, a.r.Session.StateJson)
	victim, err := s.Dispatcher.GetSession(ctx, id, "victim")
	require.NoError(t, err)
	require.Zero(t, victim.Revision, "the session the result named changed")
}

// A forged result with thousands of junk intents costs the session one
// bounded log entry: an earlier call's intents, applied again, are
// skipped.
func TestApplyIntentsAfterAFloodOfRefusals(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, id := t.Context(), identity.Default
	early, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: `{"key":"a","value":1}`, Session: "s5"}, 30*time.Second)
	require.NoError(t, err)
	ar, err := s.Dispatcher.ApplyIntents(ctx, id, early.CallId)
	require.NoError(t, err)
	require.Equal(t, int32(1), ar.Applied)

	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`, Session: "s5"}, 30*time.Second)
	require.NoError(t, err)
	junk := make([]*toolwirev1.Intent, 5000)
	for i := range junk {
		junk[i] = &toolwirev1.Intent{Id: fmt.Sprint("j", i), Type: "junk"}
	}
	forgeResult(t, s, r.Response, junk...)
	ar, err = s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
	require.NoError(t, err)
	require.Zero(t, ar.Applied)
	require.LessOrEqual(t, len(ar.Refused), intents.MaxPerResponse+1, "the answer lists a bounded number of refusals")
	require.Len(t, ar.Session.Applied, 1)
	require.Len(t, ar.Session.Log, 2)

	ar, err = s.Dispatcher.ApplyIntents(ctx, id, early.CallId)
	require.NoError(t, err)
	require.Zero(t, ar.Applied, "the earlier call's intents applied twice")
	require.Equal(t, int32(1), ar.Skipped)
}
