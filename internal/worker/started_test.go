package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A tool that is not safe to rerun never runs without its durable STARTED
// record: while the events stream refuses every new message (full, and
// discarding new ones) the call is handed back unrun; once the stream
// stores again, a later delivery runs it, exactly once (issue 12, finding
// B: the worker used to log "durable event not stored" and run it anyway,
// so a crash then let the redelivery run it a second time).
func TestNoDurableStartedNoExecution(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	pay := tool.Must(tool.New("pay_once", func(context.Context, empty) (string, error) {
		runs.Add(1)
		return "paid", nil
	})) // neither idempotent nor read-only
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, pay)
	ctx := t.Context()

	// Fill the events stream: one message, at most one, new ones refused.
	events := s.Env.Bus.Events
	_, err := s.Env.Bus.JS.Publish(ctx, s.Env.Bus.Subjects.Event("default", "filler", "filler"), []byte("x"))
	require.NoError(t, err)
	info, err := events.Info(ctx)
	require.NoError(t, err)
	open := info.Config
	full := open
	full.MaxMsgs, full.Discard = int64(info.State.Msgs), jetstream.DiscardNew
	_, err = s.Env.Bus.JS.UpdateStream(ctx, full)
	require.NoError(t, err)
	_, err = s.Env.Bus.JS.Publish(ctx, s.Env.Bus.Subjects.Event("default", "filler", "probe"), []byte("x"))
	require.Error(t, err, "the events stream refuses new messages")

	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "pay_once"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)

	// Wait for a second delivery (the first was handed back) or a run.
	pool, err := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer(bus.TypeToken(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE)))
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		ci, err := pool.Info(ctx)
		require.NoError(t, err)
		if runs.Load() > 0 || ci.Delivered.Consumer >= 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the call was neither run nor delivered again")
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	require.Zero(t, runs.Load(), "run without a stored STARTED event")
	require.Positive(t, w.Stats().NotStarted)

	_, err = s.Env.Bus.JS.UpdateStream(ctx, open)
	require.NoError(t, err)
	r, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, int32(1), runs.Load(), "run exactly once")
}

// Two deliveries of one call can both find no earlier attempt: a worker
// that stalls past AckWait before its STARTED is stored, and the
// redelivery handed to another worker meanwhile. The STARTED stored first
// wins; the other delivery never runs the tool (issue 12: a
// non-idempotent tool ran twice). Here the winner's STARTED is written
// before the worker sees the call, as a stalled delivery's would be; the
// worker's own STARTED lands after it, so it leaves the call alone, and the
// call's next delivery answers UNKNOWN_OUTCOME (the winner never
// reported) — run by nobody here, and certainly not twice.
func TestSecondDeliveryNeverRunsAStartedAttempt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	pay := tool.Must(tool.New("pay_twice_never", func(context.Context, empty) (string, error) {
		runs.Add(1)
		return "paid", nil
	})) // neither idempotent nor read-only
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	pool := bus.PoolConfig{AckWait: time.Second}
	first := startCustomWorker(t, s, worker.Config{}, pool, pay)
	ctx := t.Context()
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	require.NoError(t, first.Stop(stop))
	cancel()

	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "pay_twice_never"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	// The other delivery's STARTED of attempt 1, stored first.
	ev, err := proto.Marshal(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED,
		CallId: sub.CallID, Tool: "pay_twice_never", Attempt: 1, Worker: "stalled"})
	require.NoError(t, err)
	_, err = s.Env.Bus.JS.Publish(ctx, s.Env.Bus.Subjects.Event("default", s.Dispatcher.Name(), sub.CallID), ev)
	require.NoError(t, err)

	second := startCustomWorker(t, s, worker.Config{}, pool, pay)
	r, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, r.Response.GetError().GetType(), "%v", r.Response)
	require.Zero(t, runs.Load(), "a second delivery ran an attempt another delivery had started")
	require.Equal(t, int64(1), second.Stats().ClaimsLost)
}
