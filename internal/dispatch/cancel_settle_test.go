package dispatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type noInput struct{}

// queueStack is a stack whose one worker has one slot, a tool that holds
// it until released ("hold") and tools that count their runs: "count"
// (neither read-only nor idempotent: its attempts store their STARTED
// before they run), "lookup" (read-only) and "put" (idempotent).
type queueStack struct {
	*dispatchtest.Stack
	started chan struct{}
	release chan struct{}
	runs    atomic.Int32
}

func startQueueStack(t *testing.T) *queueStack {
	q := &queueStack{started: make(chan struct{}, 1), release: make(chan struct{})}
	hold := tool.Must(tool.New("hold", func(ctx context.Context, _ noInput) (string, error) {
		q.started <- struct{}{}
		select {
		case <-q.release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	counting := func(_ context.Context, _ noInput) (string, error) {
		q.runs.Add(1)
		return "ran", nil
	}
	q.Stack = dispatchtest.Start(t, dispatchtest.Options{Concurrency: 1, Tools: []*tool.Tool{hold,
		tool.Must(tool.New("count", counting)),
		tool.Must(tool.New("lookup", counting, tool.ReadOnly())),
		tool.Must(tool.New("put", counting, tool.Idempotent())),
	}})
	return q
}

// busy submits "hold" and waits until it holds the worker's one slot.
func (q *queueStack) busy(t *testing.T) string {
	sub, err := q.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	select {
	case <-q.started:
	case <-time.After(time.Minute): // a bound well below the package's, on any host
		t.Fatal("hold never started")
	}
	return sub.CallID
}

// settledWith checks that call id of tool has its answer stored now,
// CANCELLED by the default agent with side effects fx, answered by a
// dispatcher.
func settledWith(t *testing.T, d *dispatch.Dispatcher, id string, fx toolwirev1.PartialSideEffects) {
	t.Helper()
	g, err := d.GetResult(t.Context(), identity.Default, id, 0)
	require.NoError(t, err)
	require.NotNil(t, g.Response, "no answer stored when Cancel returned (state %v)", g.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.Error.Type)
	require.Equal(t, fx, g.Response.Error.PartialSideEffects, g.Response.Error.Message)
	require.Equal(t, "dispatcher", g.Response.Meta.Source)
	require.Equal(t, identity.Default.Agent, g.Response.Meta.CancelledBy)
}

// A call queued behind a busy worker is answered CANCELLED by the
// dispatcher that cancels it, before Cancel returns (not when a worker
// frees up and takes it): through another replica than the one that
// admitted it, whose waiting caller gets the answer. The worker that
// takes it later does not run it and keeps that answer: one result.
func TestCancelOfAQueuedCallIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	q := startQueueStack(t)
	ctx := t.Context()
	other := q.StartDispatcher(t, dispatch.Config{Name: "other"})
	holder := q.busy(t)
	sub, err := q.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "count"})
	require.NoError(t, err)
	waited := make(chan *toolwirev1.ToolResponse, 1)
	go func() {
		g, err := q.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
		if err != nil {
			g = &toolwirev1.GetResultResponse{}
		}
		waited <- g.Response
	}()
	q.WaitAccepted(t, sub.CallID) // Submit sends it without waiting for the stream to store it

	out, err := other.Cancel(ctx, identity.Default, sub.CallID, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	settledWith(t, other, sub.CallID, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE)
	settledWith(t, q.Dispatcher, sub.CallID, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE)
	select {
	case r := <-waited:
		require.NotNil(t, r, "the waiting caller got no answer")
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.Error.Type)
	case <-time.After(time.Minute):
		t.Fatal("the caller waiting on the admitting replica was not answered")
	}
	var last *toolwirev1.CallEvent
	require.NoError(t, other.Watch(ctx, identity.Default, sub.CallID, func(ev *toolwirev1.CallEvent) error {
		last = ev
		return nil
	}))
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, last.Type)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, last.Response.Error.Type)
	out, err = q.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "again")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, out)

	// The worker frees up, takes the queued call, never runs it, and the
	// dispatcher's answer stays the only result.
	close(q.release)
	g, err := q.Dispatcher.GetResult(ctx, identity.Default, holder, time.Minute)
	require.NoError(t, err)
	require.True(t, g.Response.GetOk(), "%v", g.Response.GetError())
	waitQueueDrained(t, q.Stack)
	require.Zero(t, q.runs.Load())
	b := q.Env.Bus
	msgs, err := bus.AllMsgsFromLeader(ctx, b.JS, b.Results, b.Subjects.ResultAnyDispatcher(identity.Default.Tenant, sub.CallID))
	require.NoError(t, err)
	require.Len(t, msgs, 1, "one terminal record")
}

// A queued call of a safe-to-rerun tool is answered at cancel time too:
// a read-only tool has no effects, and an idempotent one's attempt
// records its start only after a while, so its answer says effects
// UNKNOWN.
func TestCancelOfAQueuedSafeCallIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	q := startQueueStack(t)
	ctx := t.Context()
	q.busy(t)
	for name, fx := range map[string]toolwirev1.PartialSideEffects{
		"lookup": toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		"put":    toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
	} {
		sub, err := q.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: name})
		require.NoError(t, err)
		q.WaitAccepted(t, sub.CallID)
		out, err := q.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "")
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
		settledWith(t, q.Dispatcher, sub.CallID, fx)
	}
	close(q.release)
	waitQueueDrained(t, q.Stack)
	require.Zero(t, q.runs.Load())
}

// A queued call whose newest event another replica wrote (a latency
// budget's overrun, recorded on that replica's subject) is answered at
// cancel time all the same: the cancel request goes on the subject of
// its ACCEPTED record, where its workers read it back, not on that of its
// newest event.
func TestCancelOfAQueuedCallWithAnotherReplicasEventIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	q := startQueueStack(t)
	ctx := t.Context()
	other := q.StartDispatcher(t, dispatch.Config{Name: "other"})
	q.busy(t)
	sub, err := q.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "count"})
	require.NoError(t, err)
	q.WaitAccepted(t, sub.CallID)
	require.True(t, dispatch.RecordLatencyOverrun(ctx, other, identity.Default, sub.CallID))

	out, err := other.Cancel(ctx, identity.Default, sub.CallID, "")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	settledWith(t, q.Dispatcher, sub.CallID, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE)
	close(q.release)
	waitQueueDrained(t, q.Stack)
	require.Zero(t, q.runs.Load())
}

// A running call of a tool that is not safe to rerun — its STARTED is
// stored before the tool runs — is not answered by the dispatcher that
// cancels it (its effects may have begun): its worker answers when the
// tool returns, and that answer is the only result stored. The tool
// here finishes what it does whatever the cancel (it ignores its
// context), so nothing is answered until it is released.
func TestCancelOfARunningCallIsAnsweredByItsWorker(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	var runs atomic.Int32
	grip := tool.Must(tool.New("grip", func(context.Context, noInput) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return "done", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 1, Tools: []*tool.Tool{grip}})
	releaseNow := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseNow) // before the stack stops, also on failure
	ctx := t.Context()
	other := s.StartDispatcher(t, dispatch.Config{Name: "other"})
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "grip"})
	require.NoError(t, err)
	select {
	case <-started: // its STARTED is stored: the worker stores it before the tool runs
	case <-time.After(time.Minute):
		t.Fatal("grip never started")
	}

	out, err := other.Cancel(ctx, identity.Default, sub.CallID, "stop it")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	g, err := other.GetResult(ctx, identity.Default, sub.CallID, 0)
	require.NoError(t, err)
	require.Nil(t, g.Response, "a running call was answered at cancel time: %v", g.Response.GetError())

	releaseNow()
	g, err = s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, g.Response, "no answer (state %v)", g.State)
	require.NotEqual(t, "dispatcher", g.Response.Meta.Source, "answered by a dispatcher: %v", g.Response.GetError())
	require.Equal(t, int32(1), runs.Load())
	waitQueueDrained(t, s)
	b := s.Env.Bus
	msgs, err := bus.AllMsgsFromLeader(ctx, b.JS, b.Results, b.Subjects.ResultAnyDispatcher(identity.Default.Tenant, sub.CallID))
	require.NoError(t, err)
	require.Len(t, msgs, 1, "one terminal record")
}

// A worker that takes a call whose cancel request was stored before its
// STARTED — it missed the tombstone (here there is none) — does not run
// it: a dispatcher may have answered the call CANCELLED already.
func TestCancelRequestStoredBeforeTheStartWins(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	count := tool.Must(tool.New("count", func(context.Context, noInput) (string, error) {
		runs.Add(1)
		return "ran", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	ctx := t.Context()
	w := s.StartWorker(t, count)
	require.NoError(t, w.Stop(ctx))
	s.WaitTool(t, "count")
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "count"})
	require.NoError(t, err)
	require.True(t, dispatch.RecordCancelRequest(ctx, s.Dispatcher, identity.Default, sub.CallID, "count", "stop"))
	s.StartWorker(t, count)
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, g.Response)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.Error.Type, g.Response.Error.Message)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, g.Response.Error.PartialSideEffects)
	require.Equal(t, "stop", g.Response.Meta.CancelReason)
	require.Zero(t, runs.Load())
}

// waitQueueDrained waits until the native pool has no call pending or
// unacknowledged.
func waitQueueDrained(t *testing.T, s *dispatchtest.Stack) {
	t.Helper()
	ctx := t.Context()
	cons, err := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, time.Minute, 20*time.Millisecond)
}
