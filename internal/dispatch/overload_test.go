package dispatch_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A full calls stream refuses new calls explicitly: OVERLOADED, retryable,
// with a retry_after; nothing already queued is dropped.
func TestFullCallsStreamAnswersOverloaded(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{CallsMaxBytes: 8 << 10}})
	ctx := t.Context()
	big := `{"text":"` + strings.Repeat("x", 1000) + `"}`
	var accepted []string
	var refused *toolwirev1.ToolResponse
	for range 100 {
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big})
		require.NoError(t, err)
		if sub.Rejected != nil {
			refused = sub.Rejected
			break
		}
		accepted = append(accepted, sub.CallID)
	}
	require.NotNil(t, refused, "a full stream must refuse")
	require.NotEmpty(t, accepted)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, refused.Error.Type)
	require.True(t, refused.Error.Retryable)
	require.Positive(t, refused.Error.RetryAfter.AsDuration())
	for _, id := range accepted {
		g, err := s.Dispatcher.GetResult(ctx, identity.Default, id, 20*time.Second)
		require.NoError(t, err)
		if g.State != toolwirev1.CallState_CALL_STATE_DONE {
			cons, _ := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
			if cons != nil {
				ci, _ := cons.Info(ctx)
				t.Logf("consumer: %+v delivered=%+v ackfloor=%+v pending=%d ackpending=%d redelivered=%d waiting=%d", ci.Config.FilterSubjects, ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
			}
			si, _ := s.Env.Bus.Calls.Info(ctx)
			t.Logf("calls: %+v", si.State)
			ri, _ := s.Env.Bus.Results.Info(ctx, jetstream.WithSubjectFilter(">"))
			t.Logf("results: %d %v", ri.State.Msgs, ri.State.Subjects)
			ei, _ := s.Env.Bus.Events.Info(ctx, jetstream.WithSubjectFilter(">"))
			t.Logf("events: %d %v", ei.State.Msgs, ei.State.Subjects)
		}
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State, "call %s", id)
		require.True(t, g.Response.Ok, "every accepted call still runs")
	}
}

// Too many callers waiting on one replica: OVERLOADED, not an unbounded
// pile of waiters.
func TestTooManyWaitersAnswersOverloaded(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	release := make(chan struct{})
	hold := tool.Must(tool.New("hold", func(context.Context, struct{}) (string, error) {
		close(running)
		<-release
		return "held", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{hold, builtin.Tools()[0]}, Dispatcher: dispatch.Config{MaxWaiting: 1}})
	ctx := t.Context()
	done := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, _ := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "hold"}, 20*time.Second)
		done <- r
	}()
	<-running // the first caller is waiting: its waiter was registered before the call was queued
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Response.GetError().GetType())
	require.True(t, r.Response.Error.Retryable)
	// The refusal is recorded: GetResult answers it, here as anywhere.
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, r.CallId, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, g.Response.GetError().GetType())
	close(release)
	require.True(t, (<-done).Response.Ok)
}

// A pool at its backlog bound refuses at admission: OVERLOADED with a
// retry_after, for Submit and Call alike, recorded, and nothing queued.
// Admission resumes once the backlog has drained.
func TestPoolPastItsBoundIsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	hold, started, release := releasedHold(8)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{hold, builtin.Tools()[0]}, Concurrency: 2,
		Dispatcher: dispatch.Config{PoolMaxBacklog: map[string]int{"native": 3}, LoadRefresh: 20 * time.Millisecond}})
	ctx := t.Context()
	var held []string
	for range 3 { // two run, one waits
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "hold"})
		require.NoError(t, err)
		require.Nil(t, sub.Rejected, "refused: %v", sub.Rejected.GetError())
		held = append(held, sub.CallID)
	}
	<-started
	<-started
	before := callsStored(t, s)

	// Refused every time; the count it names may be one too many until
	// the next read when the third call's publish was answered while a
	// read was under way (internal/poolview, published): never too few.
	var sub *dispatch.Submitted
	requireEventually(t, func() bool {
		var err error
		sub, err = s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
		require.NoError(t, err)
		requireOverloaded(t, sub.Rejected, "at its bound of 3")
		return strings.Contains(sub.Rejected.Error.Message, "pool native has 3 calls queued or running")
	}, "a refusal names the three calls")
	c, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, c.State)
	requireOverloaded(t, c.Response, "at its bound of 3")
	require.Equal(t, before, callsStored(t, s), "a refused call is never queued")
	// Not recorded (a stored message per refusal would let an overload
	// fill the events store): only the refused caller has the answer.
	last, err := bus.LastMsg(ctx, s.Env.Bus.Events, s.Env.Bus.Subjects.EventsAnyDispatcher("default", sub.CallID))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "%v", last)
	// A call with an idempotency key is refused before its key is
	// claimed (poolview.Load.Peek): nothing is written, neither a key nor
	// a REJECTED event (no retry can be waiting on its call id), and a
	// repeat of the key is refused the same way, never answered with a
	// call that did not run.
	keyedReq := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`, IdempotencyKey: "k-1"}
	for range 2 {
		keyed, err := s.Dispatcher.Submit(ctx, identity.Default, keyedReq)
		require.NoError(t, err)
		requireOverloaded(t, keyed.Rejected, "at its bound of 3")
		require.False(t, keyed.Duplicate)
		last, err := bus.LastMsg(ctx, s.Env.Bus.Events, s.Env.Bus.Subjects.EventsAnyDispatcher("default", keyed.CallID))
		require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "%v", last)
	}
	require.Equal(t, keyStore{}, keysStored(ctx, t, s), "a refusal writes nothing to the idempotency store")

	close(release)
	for _, id := range held {
		g, err := s.Dispatcher.GetResult(ctx, identity.Default, id, 20*time.Second)
		require.NoError(t, err)
		require.True(t, g.Response.GetOk(), "held calls finish")
	}
	var accepted string
	requireEventually(t, func() bool {
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
		require.NoError(t, err)
		accepted = sub.CallID
		return sub.Rejected == nil
	}, "admission resumes once the backlog has drained")
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, accepted, 20*time.Second)
	require.NoError(t, err)
	require.True(t, g.Response.GetOk())
	// The refused key was never bound: its next call runs.
	keyed, err := s.Dispatcher.Submit(ctx, identity.Default, keyedReq)
	require.NoError(t, err)
	require.Nil(t, keyed.Rejected)
	require.False(t, keyed.Duplicate)
}

// A call that its pool would start only after its schedule-to-start is
// refused at once; a call without one is still accepted (here with no
// default bound on queue wait), and the same call is accepted once the
// backlog is gone.
func TestExpectedWaitPastScheduleToStartIsRefused(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 1, Dispatcher: dispatch.Config{LoadRefresh: 20 * time.Millisecond, MaxQueueWait: -1}})
	ctx := t.Context()
	sleep := func(s2s time.Duration) *toolwirev1.CallRequest {
		r := &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"40ms"}`}
		if s2s > 0 {
			r.ScheduleToStart = durationpb.New(s2s)
		}
		return r
	}
	var queued []string
	for range 100 { // about 4s of work for one slot
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, sleep(0))
		require.NoError(t, err)
		require.Nil(t, sub.Rejected)
		queued = append(queued, sub.CallID)
	}
	var refused *toolwirev1.ToolResponse
	requireEventually(t, func() bool { // once the pool's rate is measured
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, sleep(100*time.Millisecond))
		require.NoError(t, err)
		refused = sub.Rejected
		return refused != nil
	}, "a call that would start too late is refused")
	requireOverloaded(t, refused, "after its schedule-to-start of ")
	require.Contains(t, refused.Error.Message, "pool native would start this call in about")
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, sleep(0))
	require.NoError(t, err)
	require.Nil(t, sub.Rejected, "a call without a schedule-to-start waits its turn")
	queued = append(queued, sub.CallID)

	for _, id := range queued {
		_, err := s.Dispatcher.GetResult(ctx, identity.Default, id, 30*time.Second)
		require.NoError(t, err)
	}
	requireEventually(t, func() bool {
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, sleep(time.Second))
		require.NoError(t, err)
		return sub.Rejected == nil
	}, "once the backlog is gone the same call is accepted")
}

// With the defaults, a call without a schedule-to-start is refused once
// its pool would start it after the default bound on queue wait (2s):
// overload is refused fast with no configuration, not after 10,000 calls
// of queue. The calls accepted before all run.
func TestCallWithoutScheduleToStartIsRefusedPastTheDefaultQueueWait(t *testing.T) {
	t.Parallel()
	// The default (dispatchtest sets a minute unless told).
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 1, Dispatcher: dispatch.Config{LoadRefresh: 20 * time.Millisecond,
		MaxQueueWait: poolview.DefaultMaxQueueWait}})
	ctx := t.Context()
	var accepted []string
	var refused *toolwirev1.ToolResponse
	// One slot running 40ms calls: 2s of queue is about 50 calls, and
	// the 10,000-call backlog bound is far off.
	for i := 0; refused == nil && i < 2000; i++ {
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"40ms"}`})
		require.NoError(t, err)
		if refused = sub.Rejected; refused == nil {
			accepted = append(accepted, sub.CallID)
		}
	}
	require.NotNil(t, refused, "2000 calls of 40ms queued for one slot, none refused")
	// The bound is the default 2s, or three of the pool's calls where
	// they take longer: on a loaded machine a "40ms" call takes 700ms.
	requireOverloaded(t, refused, "past the longest wait a call without a schedule-to-start is admitted for (")
	m := regexp.MustCompile(`admitted for \(([^)]+)\)`).FindStringSubmatch(refused.Error.Message)
	require.NotNil(t, m, refused.Error.Message)
	bound, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, bound, poolview.DefaultMaxQueueWait, refused.Error.Message)
	require.Less(t, len(accepted), 1000, "the backlog bound, not the queue wait, refused")
	for _, id := range accepted {
		g, err := s.Dispatcher.GetResult(ctx, identity.Default, id, time.Minute)
		require.NoError(t, err)
		require.True(t, g.Response.GetOk(), "an accepted call did not run: %v", g.Response.GetError())
	}
}

// The default bound on queue wait scales with the pool's own call time:
// a pool of slow tools (one slot, 2s calls) with a short queue, two calls
// that it starts in about 4s, admits a call without a schedule-to-start
// (3 × 2s = 6s), where a fixed 2s would refuse it; with the pool's own
// bound of 2s (--pool-max-queue-wait native=2s) the same call is refused.
// A fast pool past 2s of queue is still refused
// (TestCallWithoutScheduleToStartIsRefusedPastTheDefaultQueueWait).
func TestSlowPoolQueuesAFewRoundsOfItsCalls(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		bounds map[string]time.Duration
		admit  bool
	}{
		{"default", nil, true},
		{"pool bound", map[string]time.Duration{"native": 2 * time.Second}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 1,
				Dispatcher: dispatch.Config{LoadRefresh: 20 * time.Millisecond, MaxQueueWait: poolview.DefaultMaxQueueWait, PoolMaxQueueWait: tt.bounds}})
			ctx := t.Context()
			slow := &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"2s"}`}
			submit := func() *dispatch.Submitted {
				sub, err := s.Dispatcher.Submit(ctx, identity.Default, slow)
				require.NoError(t, err)
				return sub
			}
			// One call measures the pool: its drain rate and call time.
			first := submit()
			require.Nil(t, first.Rejected)
			g, err := s.Dispatcher.GetResult(ctx, identity.Default, first.CallID, time.Minute)
			require.NoError(t, err)
			require.True(t, g.Response.GetOk(), g.Response.GetError().GetMessage())
			require.Eventually(t, func() bool { return nativePool(t, s).CallTime > 0 }, 10*time.Second, 10*time.Millisecond,
				"the pool's call time is measured")
			require.GreaterOrEqual(t, nativePool(t, s).CallTime, 1900*time.Millisecond)
			if !tt.admit {
				// Its own bound of 2s refuses within a queue of two calls.
				var refused *toolwirev1.ToolResponse
				for i := 0; refused == nil && i < 4; i++ {
					refused = submit().Rejected
				}
				requireOverloaded(t, refused, "past the longest wait a call without a schedule-to-start is admitted for (2s)")
				return
			}
			require.GreaterOrEqual(t, nativePool(t, s).WaitBound, 5700*time.Millisecond, "3 times the call time")

			// One running and one queued: 2 to 4 s before the next starts,
			// past a fixed 2 s bound and well within 3 call times. (Two
			// queued put the next call's wait at the bound itself: 6.03 s
			// against 5.95 s when the view saw none of them started, on a
			// loaded machine.)
			for range 2 {
				require.Nil(t, submit().Rejected, "a queue of under two calls refused")
			}
			var p dispatch.PoolStatus
			require.Eventually(t, func() bool { p = nativePool(t, s); return p.ExpectedWait > 2*time.Second }, 10*time.Second, 10*time.Millisecond,
				"a fixed 2s bound would refuse the next call")
			next := submit()
			require.Nil(t, next.Rejected, "slow pool, %s expected wait, bound %s (call time %s)", p.ExpectedWait, p.WaitBound, p.CallTime)
			g, err = s.Dispatcher.GetResult(ctx, identity.Default, next.CallID, time.Minute)
			require.NoError(t, err)
			require.True(t, g.Response.GetOk(), "the accepted call did not run: %v", g.Response.GetError())
		})
	}
}

// nativePool is the native pool as the dispatcher last read it.
func nativePool(t *testing.T, s *dispatchtest.Stack) dispatch.PoolStatus {
	t.Helper()
	for _, p := range s.Dispatcher.Pools() {
		if p.Pool == "native" {
			return p
		}
	}
	t.Fatal("no native pool")
	return dispatch.PoolStatus{}
}

// A store every call writes that is nearly full refuses new calls with
// OVERLOADED before it fills, naming it; nothing is queued.
func TestNearlyFullStoreRefusesAdmission(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{CallsMaxBytes: 64 << 10},
		Dispatcher: dispatch.Config{LoadRefresh: 20 * time.Millisecond}})
	ctx := t.Context()
	big := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	var refused *toolwirev1.ToolResponse
	for i := 0; refused == nil; i++ {
		require.Less(t, i, 2000, "the calls store never refused")
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big}, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
		if !r.Response.Ok {
			refused = r.Response
		}
	}
	// The first refusal may be the server's own (the store filled between
	// two reads of its use, every 2s); the view's refusal follows.
	requireOverloaded(t, refused, "")
	require.Eventually(t, func() bool {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big}, 20*time.Second)
		if err == nil && !r.Response.Ok && strings.Contains(r.Response.Error.Message, "the calls store (stream TOOLWIRE_CALLS) is ") {
			refused = r.Response
			return true
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the store's use was never read as nearly full")
	requireOverloaded(t, refused, "the calls store (stream TOOLWIRE_CALLS) is ")
	require.Contains(t, refused.Error.Message, "of 64KiB): new calls are refused until it is below 90%")
	require.Equal(t, 30*time.Second, refused.Error.RetryAfter.AsDuration())
	require.Contains(t, refused.Error.Suggestion, "--stream-max-bytes calls=")
	before := callsStored(t, s)
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big}, 20*time.Second)
	require.NoError(t, err)
	requireOverloaded(t, r.Response, "the calls store")
	require.Equal(t, before, callsStored(t, s), "a refused call is never queued")
}

func requireOverloaded(t *testing.T, r *toolwirev1.ToolResponse, msg string) {
	t.Helper()
	require.NotNil(t, r, "want a refusal")
	require.False(t, r.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Error.GetType(), r.Error.GetMessage())
	require.True(t, r.Error.Retryable)
	require.GreaterOrEqual(t, r.Error.RetryAfter.AsDuration(), time.Second)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Error.PartialSideEffects)
	require.Contains(t, r.Error.Message, msg)
}

// callsStored is the number of messages in the calls stream.
func callsStored(t *testing.T, s *dispatchtest.Stack) uint64 {
	t.Helper()
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	return info.State.Msgs
}

// requireEventually polls cond every 20ms until it holds, failing after
// 20s.
func requireEventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}
}

// A pool that finishes many times its bound between two reads of its
// backlog is never refused: calls finished since the last read are not
// taken for a backlog (they were, until the dispatcher learned to read
// again early and to count the pool's drain rate).
func TestFastPoolIsNotTakenForAFullOne(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 8,
		Dispatcher: dispatch.Config{PoolMaxBacklog: map[string]int{"native": 200}, LoadRefresh: time.Hour}})
	ctx := t.Context()
	var wg sync.WaitGroup
	refused := make(chan string, 1)
	for range 4 {
		wg.Go(func() {
			for range 300 { // 1200 calls, six times the bound
				r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
				if err == nil && !r.Response.GetOk() {
					select {
					case refused <- r.Response.GetError().GetMessage():
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case msg := <-refused:
		t.Fatalf("refused: %s", msg)
	default:
	}
}

// A full discard-old store (results, events) drops its oldest messages and
// never refuses admission: refusing until they aged out would refuse every
// call for as long as the store keeps them (review finding).
func TestFullDiscardOldStoreNeverRefuses(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{ResultsMaxBytes: 64 << 10, EventsMaxBytes: 64 << 10},
		Dispatcher: dispatch.Config{LoadRefresh: 20 * time.Millisecond}})
	ctx := t.Context()
	big := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	// At least 200 calls (about 400 KB of results: the store is full many
	// times over) and for longer than the view's 2s between reads of store
	// use, so that a read sees the store full.
	start := time.Now()
	for i := 0; i < 200 || time.Since(start) < 5*time.Second; i++ {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big}, 20*time.Second)
		require.NoError(t, err)
		require.True(t, r.Response.Ok, "call %d: %v", i, r.Response.Error)
	}
}
