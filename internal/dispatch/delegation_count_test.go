package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Children racing for a parent's places through two dispatcher replicas
// at once: exactly the bound is admitted, every other child is refused
// with the fan-out rule. (Listing the keys after writing its own, two
// children racing for the last place could both be refused.)
func TestChildrenRacingAcrossReplicasFillTheFanOutExactly(t *testing.T) {
	t.Parallel()
	const bound, racers = 4, 16
	cfg := dispatch.Config{MaxDelegationFanOut: bound}
	s := delegationStack(t, cfg)
	replicas := []*dispatch.Dispatcher{s.Dispatcher, s.StartDispatcher(t, cfg)}
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })

	start := make(chan struct{})
	answers := make(chan *dispatch.Submitted, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			r, err := replicas[i%2].Submit(t.Context(), identity.Default,
				&toolwirev1.CallRequest{Tool: "hold", ArgumentsJson: `{}`, ParentCallId: root.CallID})
			if err != nil {
				t.Errorf("submit: %v", err)
				return
			}
			answers <- r
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	admitted := 0
	for r := range answers {
		if r.Rejected == nil {
			admitted++
			continue
		}
		te := r.Rejected.GetError()
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, te.GetType(), te.GetMessage())
		require.Contains(t, te.GetMessage(), "bound of 4 delegated calls")
	}
	require.Equal(t, bound, admitted)
}

// A child refused after the delegation step (here by the policy) is taken
// out of its parent's and its chain's counts: the next child takes its
// place, and the bound still holds after it.
func TestARefusedChildFreesItsPlace(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationFanOut: 2, MaxDelegationDescendants: 2})
	s.ApplyPolicy(t, "tenant:\n  default: allow\n  rules:\n    - {id: no-echo, effect: deny, tools: [echo], reason: no echo}\n")
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })

	first := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, first.Rejected, "%v", first.Rejected.GetError())
	for range 3 { // each refused child is counted, then taken out again
		denied, err := s.Dispatcher.Submit(t.Context(), identity.Default,
			&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`, ParentCallId: root.CallID})
		require.NoError(t, err)
		require.NotNil(t, denied.Rejected)
		require.Contains(t, denied.Rejected.GetError().GetMessage(), "no echo")
	}
	second := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, second.Rejected, "the refused children took the places: %v", second.Rejected.GetError())
	third := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.NotNil(t, third.Rejected)
	require.Contains(t, third.Rejected.GetError().GetMessage(), "bound of 2 delegated calls")
}

// A child answered without being published — a repeat of its
// idempotency key with other arguments (CONFLICT) — is taken out of the
// counts too: repeats never use up a parent's places (review of
// h49-fanout, finding 1; the keys leaked the same way before counters).
func TestAChildAnsweredWithoutAPublishFreesItsPlace(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationFanOut: 2, MaxDelegationDescendants: 2})
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	keyed := func(text string) (*dispatch.Submitted, error) {
		return s.Dispatcher.Submit(t.Context(), identity.Default,
			&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"` + text + `"}`, ParentCallId: root.CallID, IdempotencyKey: "k1"})
	}
	first, err := keyed("a")
	require.NoError(t, err)
	require.Nil(t, first.Rejected, "%v", first.Rejected.GetError())
	for _, text := range []string{"b", "c", "d"} {
		repeat, err := keyed(text) // answered CONFLICT: the key is bound to other arguments
		require.True(t, err != nil || repeat.Rejected != nil || repeat.CallID != first.CallID, "a key reused with other arguments is not admitted anew")
	}
	second := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, second.Rejected, "the repeats took the places: %v", second.Rejected.GetError())
}

// Admitting a delegated call lists no keys: no consumer is created on the
// limits bucket however many children a parent has (listing the children
// made an ordered consumer per admission, twice). GetDelegation lists
// them from the bucket's leader, with no consumer either; a key lister's
// consumer shows that the probe sees one.
func TestDelegatedAdmissionCreatesNoConsumer(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	ctx := t.Context()
	probe, err := bus.Dial(bus.ConnConfig{URL: s.Env.URL, Name: "probe"})
	require.NoError(t, err)
	t.Cleanup(probe.Close)
	limits := "KV_" + s.Env.Bus.Config.LimitsBucket()
	creates := make(chan *nats.Msg, 1024)
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE." + limits, "$JS.API.CONSUMER.CREATE." + limits + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + limits + ".>"} {
		sub, err := probe.ChanSubscribe(subj, creates)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, probe.Flush())

	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	for range 20 {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`,
			ParentCallId: root.CallID}, 20*time.Second)
		require.NoError(t, err)
		require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	}
	require.NoError(t, probe.Flush()) // every request the server routed before now has reached the probe
	require.Zero(t, len(creates), "consumers created on the limits bucket while admitting delegated calls")

	dg, err := s.Dispatcher.GetDelegation(ctx, identity.Default, root.CallID)
	require.NoError(t, err)
	require.Len(t, dg.Children, dispatch.MaxDelegationChildrenShown)
	require.NoError(t, probe.Flush())
	require.Zero(t, len(creates), "consumers created on the limits bucket to list the children")

	kl, err := s.Env.Bus.Limits.ListKeys(ctx)
	require.NoError(t, err)
	for range kl.Keys() { // drained to its end
	}
	require.NoError(t, probe.Flush())
	require.NotZero(t, len(creates), "the probe sees a key lister's consumer")
}

// A replica that remembers a parent it found running (its next children
// read only the subject of its result) still refuses a child once the
// parent has finished, though the parent's result was routed to another
// replica and never passed this one: whether a parent has finished is
// read for every child.
func TestARememberedParentThatFinishedTakesNoChild(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	gate := releasedTool("gate", release)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{gate, holdTool("hold")}, Concurrency: 16})
	other := s.StartDispatcher(t, dispatch.Config{})
	parent := submitChild(t, other, identity.Default, "gate", "")
	require.Nil(t, parent.Rejected)
	var children []string
	t.Cleanup(func() {
		for _, c := range children {
			_, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, c, "")
		}
	})
	// Children through the first replica until it remembers the parent
	// (once the parent's start is stored).
	deadline := time.Now().Add(20 * time.Second)
	for !dispatch.RemembersParent(s.Dispatcher, identity.Default.Tenant, parent.CallID) {
		require.True(t, time.Now().Before(deadline), "the parent is not remembered after %d children", len(children))
		c := submitChild(t, s.Dispatcher, identity.Default, "hold", parent.CallID)
		require.Nil(t, c.Rejected, "%v", c.Rejected.GetError())
		children = append(children, c.CallID)
	}

	close(release)
	r, err := other.GetResult(t.Context(), identity.Default, parent.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.GetOk())
	require.True(t, dispatch.RemembersParent(s.Dispatcher, identity.Default.Tenant, parent.CallID),
		"still remembered: its result was routed to the other replica")
	late := submitChild(t, s.Dispatcher, identity.Default, "hold", parent.CallID)
	require.NotNil(t, late.Rejected, "a child of a finished parent")
	te := late.Rejected.GetError()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, te.GetType(), te.GetMessage())
	require.Contains(t, te.GetMessage(), "has finished")
	require.False(t, dispatch.RemembersParent(s.Dispatcher, identity.Default.Tenant, parent.CallID), "a finished parent is forgotten")
}
