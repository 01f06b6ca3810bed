package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

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
	b := s.Env.Bus // signed as every record is, with a key the dispatcher believes
	_, err = b.JS.PublishMsg(ctx, b.Signer.SignedMsg(b.Subjects.Event("default", s.Dispatcher.Name(), sub.CallID), signing.KindEvent, sub.CallID, 1, ev, nil))
	require.NoError(t, err)

	second := startCustomWorker(t, s, worker.Config{}, pool, pay)
	r, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, r.Response.GetError().GetType(), "%v", r.Response)
	// What is known, not "started and ended without a result".
	msg := r.Response.GetError().GetMessage()
	require.Contains(t, msg, `attempt 1 started at`)
	require.Contains(t, msg, `on worker "`+second.Name()+`"`, "the last STARTED, the second worker's")
	require.Contains(t, msg, "no end or result was recorded")
	require.Contains(t, msg, "may still be running, or may have run")
	require.Zero(t, runs.Load(), "a second delivery ran an attempt another delivery had started")
	require.Equal(t, int64(1), second.Stats().ClaimsLost)
}
