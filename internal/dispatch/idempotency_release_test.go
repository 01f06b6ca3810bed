package dispatch_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// spentBudget is a stack whose echo calls in session s-1 are refused
// BUDGET_EXCEEDED after their key is claimed (the limits step comes after
// it): the budget of one call is spent by a call without a key.
func spentBudget(t *testing.T) *dispatchtest.Stack {
	t.Helper()
	s, _ := policyLimitsStack(t, `limits:
  - id: one
    key: session
    tools: [echo]
    budget: {units: 1, window: 24h}
`)
	r, err := s.Dispatcher.Call(t.Context(), session("a"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"spend"}`, Session: "s-1"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	return s
}

// Repeats of a key whose calls are refused after the claim, at once:
// while one call's key is being released another finds it claimed and
// then gone. No repeat is ever an error (INTERNAL): each is refused by
// its limit, CONFLICT with the call the key is bound to, or, while the
// key keeps changing hands, refused OVERLOADED with a retry_after.
func TestRepeatWhileTheKeyIsReleasedIsNeverAnError(t *testing.T) {
	t.Parallel()
	s := spentBudget(t)
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 40 {
				// Arguments of their own, past the loop guard: a repeat
				// finding the key bound is CONFLICT.
				o := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: fmt.Sprintf(`{"text":"%d-%d"}`, g, i), Session: "s-1", IdempotencyKey: "k"}
				sub, err := s.Dispatcher.Submit(t.Context(), session("a"), o)
				require.NoError(t, err, "goroutine %d, repeat %d: never an error (INTERNAL)", g, i)
				what := "accepted"
				switch {
				case sub.Rejected != nil:
					e := sub.Rejected.GetError()
					what = e.GetType().String()
					require.Contains(t, []toolwirev1.ErrorType{toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED,
						toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED}, e.GetType(), e.GetMessage())
					if e.GetType() == toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED {
						require.Positive(t, e.GetRetryAfter().AsDuration())
					}
				default:
					t.Errorf("accepted %s: the budget is spent", sub.CallID)
				}
				mu.Lock()
				answers[what]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("answers: %v", answers)
}

// A calls stream that fills between two reads of its use refuses the
// call that finds it full as a full store does: OVERLOADED, retry_after
// 30s, naming the store; recorded, since its admission record is out.
func TestCallsStreamFullBetweenReads(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{CallsMaxBytes: 16 << 10},
		Dispatcher: dispatch.Config{LoadRefresh: time.Hour}})
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		require.True(t, time.Now().Before(deadline), "the calls stream never refused a call")
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: fmt.Sprintf(`{"text":"%d %s"}`, i, strings.Repeat("x", 512))})
		require.NoError(t, err)
		if sub.Rejected == nil {
			continue
		}
		requireOverloaded(t, sub.Rejected, "the calls store is full")
		require.Equal(t, 30*time.Second, sub.Rejected.Error.RetryAfter.AsDuration())
		// Recorded after its admission record: every replica answers it.
		g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 0)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
		requireOverloaded(t, g.Response, "the calls store is full")
		break
	}
}

// A key whose release failed (its purge was refused) stays marked as
// bound to a call refused before it ran: a repeat takes it over (a
// conditional update of the record), runs, and from then on the key
// answers the new call; it is never answered with the old refusal.
func TestKeyOfARefusedCallWhoseReleaseFailedIsTakenOver(t *testing.T) {
	t.Parallel()
	s := spentBudget(t)
	ctx := t.Context()
	dispatch.FailKeyPurges(s.Dispatcher)
	o := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"k"}`, Session: "s-1", IdempotencyKey: "k"}
	refused, err := s.Dispatcher.Submit(ctx, session("a"), o)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, refused.Rejected.GetError().GetType())
	require.Equal(t, uint64(1), keysStored(ctx, t, s).msgs, "the key's record, marked refused")

	// The same key in a session with budget left: taken over, run.
	o.Session = "s-2"
	r, err := s.Dispatcher.Call(ctx, session("a"), o, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
	require.NotEqual(t, refused.CallID, r.CallId)
	dup, err := s.Dispatcher.Submit(ctx, session("a"), o)
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, r.CallId, dup.CallID, "the key answers the call that took it over")
	require.Equal(t, uint64(1), keysStored(ctx, t, s).msgs, "the record was replaced")
}

// A late release (of a call whose key expired meanwhile and was claimed
// again) purges only its own claim: the newer claim survives, and a
// repeat is answered with the newer call, never taken by a third one.
func TestLateReleaseLeavesANewerClaim(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	o := keyed("k")
	a, err := s.Dispatcher.Submit(ctx, identity.Default, o)
	require.NoError(t, err)
	require.Nil(t, a.Rejected)
	name := dispatch.KeyName(s.Dispatcher, identity.Default, "k")
	e, err := s.Env.Bus.Idempotency.Get(ctx, name)
	require.NoError(t, err)
	revA := e.Revision()

	// The key expires (its TTL; here a purge of its subject) and a call
	// claims it again.
	st, err := s.Env.Bus.JS.Stream(ctx, "KV_"+s.Env.Bus.Config.IdempotencyBucket())
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+s.Env.Bus.Config.IdempotencyBucket()+"."+name)))
	c, err := s.Dispatcher.Submit(ctx, identity.Default, o)
	require.NoError(t, err)
	require.Nil(t, c.Rejected)
	require.False(t, c.Duplicate)

	dispatch.ReleaseKey(s.Dispatcher, identity.Default, o, revA) // the first call's, late
	d, err := s.Dispatcher.Submit(ctx, identity.Default, o)
	require.NoError(t, err)
	require.True(t, d.Duplicate, "the newer claim survives an older call's release")
	require.Equal(t, c.CallID, d.CallID)

	// Its own release removes it.
	e, err = s.Env.Bus.Idempotency.Get(ctx, name)
	require.NoError(t, err)
	dispatch.ReleaseKey(s.Dispatcher, identity.Default, o, e.Revision())
	_, err = s.Env.Bus.Idempotency.Get(ctx, name)
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
}
