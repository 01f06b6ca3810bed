package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A child that passed the delegation step and is still in admission (a
// before-hook holds it) when its parent is cancelled ends CANCELLED: it
// is listed by the cascade but not yet published.
func TestAChildInAdmissionIsCancelledWithItsParent(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 4), make(chan struct{})
	gate := tool.Must(tool.New("gate", func(ctx context.Context, _ hook.BeforeRequest) (hook.BeforeAnswer, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return hook.BeforeAnswer{Action: "continue"}, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{holdTool("hold"), holdTool("child"), gate}, Concurrency: 8})
	s.ApplyPolicy(t, "tenant: {default: allow}\nhooks:\n  - {id: g, phase: before, tool: gate, tools: [child], timeout: 1m}\n")
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	type res struct {
		s   *dispatch.Submitted
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "child", ArgumentsJson: `{}`, ParentCallId: root.CallID})
		done <- res{r, err}
	}()
	<-entered // the child passed the delegation step
	out, err := s.Dispatcher.Cancel(ctx, identity.Default, root.CallID, "stop")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	close(release)
	r := <-done
	require.NoError(t, r.err)
	waitResult(t, s, root.CallID)
	if r.s.Rejected != nil {
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.s.Rejected.GetError().GetType(), "%v", r.s.Rejected.GetError())
		return
	}
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, r.s.CallID, "") })
	resp := waitResult(t, s, r.s.CallID) // a hold call ends only when cancelled
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, resp.GetError().GetType(), "%v", resp.GetError())
}

// A child the cascade lists while no dispatcher has published it yet
// gets its tombstone: the cascade's cancel of an unknown child is not
// "nothing to do".
func TestTheCascadeTombstonesAListedChildItDoesNotKnow(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	child := "01JAAAAAAAAAAAAAAAAAAAAAAA" // a child in admission: its key, no call yet
	require.NoError(t, dispatch.RecordLinkForTest(ctx, s.Dispatcher, identity.Default.Tenant, child, root.CallID))
	_, err := s.Dispatcher.Cancel(ctx, identity.Default, root.CallID, "stop")
	require.NoError(t, err)
	_, err = s.Env.Bus.Cancels.Get(ctx, bus.CancelKey(identity.Default.Tenant, child))
	require.NoError(t, err, "no tombstone for the listed child")
}

// A refused child's link is forgotten with purge markers that carry a
// TTL: the limits bucket has no MaxAge, and a marker without one would
// stay for ever.
func TestForgottenLinksLeaveMarkersThatExpire(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationFanOut: 1})
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	require.Nil(t, submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID).Rejected)
	refused := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.NotNil(t, refused.Rejected)
	st, err := s.Env.Bus.JS.Stream(ctx, "KV_"+s.Env.Bus.Config.LimitsBucket())
	require.NoError(t, err)
	for _, k := range []string{".dlgk.default." + root.CallID + "." + refused.CallID} {
		m, err := st.GetLastMsgForSubject(ctx, "$KV."+s.Env.Bus.Config.LimitsBucket()+k)
		require.NoError(t, err)
		require.Equal(t, "PURGE", m.Header.Get("KV-Operation"), k)
		require.NotEmpty(t, m.Header.Get("Nats-TTL"), "marker of %s has no TTL", k)
	}
	_, err = st.GetLastMsgForSubject(ctx, "$KV."+s.Env.Bus.Config.LimitsBucket()+".dlg.default."+refused.CallID)
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "one key a delegated call (its link is the key's value), and no marker of another")
}

// An idempotent repeat of a delegated call is answered as the original
// call, also when the parent is at its fan-out bound (the original is
// its one child).
func TestAnIdempotentRepeatAtTheFanOutBoundIsTheOriginal(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationFanOut: 1})
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	req := &toolwirev1.CallRequest{Tool: "hold", ArgumentsJson: `{}`, ParentCallId: root.CallID, IdempotencyKey: "k1"}
	first, err := s.Dispatcher.Submit(ctx, identity.Default, req)
	require.NoError(t, err)
	require.Nil(t, first.Rejected)
	again, err := s.Dispatcher.Submit(ctx, identity.Default, req)
	require.NoError(t, err)
	require.Nil(t, again.Rejected, "repeat refused: %v", again.Rejected.GetError())
	require.True(t, again.Duplicate)
	require.Equal(t, first.CallID, again.CallID)
	other := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID) // the bound still holds
	require.NotNil(t, other.Rejected)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, other.Rejected.GetError().GetType())
}

// An idempotent repeat after the parent was cancelled (and finished) is
// answered as the original call; a new key is refused.
func TestAnIdempotentRepeatAfterTheParentEndedIsTheOriginal(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	req := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`, ParentCallId: root.CallID, IdempotencyKey: "k2"}
	first, err := s.Dispatcher.Submit(ctx, identity.Default, req)
	require.NoError(t, err)
	require.Nil(t, first.Rejected)
	_, err = s.Dispatcher.Cancel(ctx, identity.Default, root.CallID, "")
	require.NoError(t, err)
	waitResult(t, s, root.CallID)
	again, err := s.Dispatcher.Submit(ctx, identity.Default, req)
	require.NoError(t, err)
	require.Nil(t, again.Rejected, "repeat refused: %v", again.Rejected.GetError())
	require.Equal(t, first.CallID, again.CallID)
	req.IdempotencyKey = "k3"
	fresh, err := s.Dispatcher.Submit(ctx, identity.Default, req)
	require.NoError(t, err)
	require.NotNil(t, fresh.Rejected, "a new call on behalf of a finished parent")
}

// A session named as a chain's loop-guard scope does not share the
// chain's count.
func TestLoopGuardChainScopeIsNotASession(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	s.ApplyPolicy(t, "loop_guard:\n  warn: 0\n  ask: 0\n  deny: 2\n  scope: chain\n  exempt: [hold]\n")
	ctx := t.Context()
	a := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, a.CallID, "") })
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"again"}`,
		Session: "chain:" + a.CallID}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk())
	r, err = s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"again"}`,
		ParentCallId: a.CallID}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "the chain's first echo: %v", r.Response.GetError())
}

// A delegation chain holds at most Config.MaxDelegationDescendants calls
// below its root, however they are spread over its parents, so that one
// Cancel of the root reaches them all; a refused call does not count.
func TestADelegationChainIsBoundedBelowItsRoot(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationDescendants: 3})
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	a := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, a.Rejected)
	b := submitChild(t, s.Dispatcher, identity.Default, "hold", a.CallID)
	require.Nil(t, b.Rejected)
	c := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, c.Rejected)
	for _, parent := range []string{root.CallID, a.CallID, b.CallID, c.CallID} {
		r := submitChild(t, s.Dispatcher, identity.Default, "hold", parent)
		require.NotNil(t, r.Rejected, "a fourth call in the chain, under %s", parent)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Rejected.GetError().GetType())
		require.Contains(t, r.Rejected.GetError().GetMessage(), "delegation chain of call "+root.CallID)
	}
	other := submitChild(t, s.Dispatcher, identity.Default, "hold", "") // another chain has its own bound
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, other.CallID, "") })
	require.Nil(t, submitChild(t, s.Dispatcher, identity.Default, "hold", other.CallID).Rejected)
}

// A limits bucket too full for a delegated call's keys refuses the call
// OVERLOADED with a retry_after, never INTERNAL.
func TestAFullLimitsStoreRefusesADelegatedCallOverloaded(t *testing.T) {
	t.Parallel()
	noop := tool.Must(tool.New("noop", func(context.Context, struct{}) (string, error) { return "", nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{holdTool("hold"), noop}, Concurrency: 16,
		Dispatcher: dispatch.Config{MaxDelegationFanOut: 4096, MaxDelegationDescendants: 4096}, Bus: bus.Config{LimitsMaxBytes: 16 << 10}}) // fills after a few hundred calls
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	var refused *toolwirev1.ToolError
	for range 4000 {
		r, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "noop", ArgumentsJson: `{}`, ParentCallId: root.CallID})
		require.NoError(t, err)
		if r.Rejected != nil {
			refused = r.Rejected.GetError()
			break
		}
	}
	require.NotNil(t, refused, "the limits store never filled")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, refused.GetType(), "%v", refused)
	require.Positive(t, refused.GetRetryAfter().AsDuration())
}

// A call's link is read from its one key under its parent, found by the
// call's id alone; a key an older release wrote (no value, the link
// under dlg.<tenant>.<call>) is read where that release put it; a call
// with neither, or whose key was removed, is at the top of its chain.
func TestLinkReadFromTheChildsKeyAndFromOlderReleases(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx, kv := t.Context(), s.Env.Bus.Limits
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = ulid.Make().String()
	}
	root, parent, child, old, gone := ids[0], ids[1], ids[2], ids[3], ids[4]
	_, err := kv.Create(ctx, "dlgk.acme."+parent+"."+child, []byte(`{"p":"`+parent+`","r":"`+root+`","d":2}`))
	require.NoError(t, err)
	_, err = kv.Create(ctx, "dlgk.acme."+parent+"."+old, nil) // as a release before issue 31's one key wrote it
	require.NoError(t, err)
	_, err = kv.Create(ctx, "dlg.acme."+old, []byte(`{"p":"`+parent+`","r":"`+root+`","d":3}`))
	require.NoError(t, err)
	_, err = kv.Create(ctx, "dlgk.acme."+parent+"."+gone, []byte(`{"p":"`+parent+`","r":"`+root+`","d":2}`))
	require.NoError(t, err)
	require.NoError(t, kv.Purge(ctx, "dlgk.acme."+parent+"."+gone))

	for _, c := range []struct {
		call, parent, root string
		depth              int32
	}{
		{child, parent, root, 2},
		{old, parent, root, 3},
		{gone, "", gone, 0},
		{root, "", root, 0},
	} {
		p, r, d, err := dispatch.LinkOf(ctx, s.Dispatcher, "acme", c.call)
		require.NoError(t, err)
		require.Equal(t, []any{c.parent, c.root, c.depth}, []any{p, r, d}, c.call)
	}
	p, r, _, err := dispatch.LinkOf(ctx, s.Dispatcher, "other", child)
	require.NoError(t, err)
	require.Equal(t, []string{"", child}, []string{p, r}, "another tenant's key is not read")
}
