package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A retry delay longer than MaxInProcessDelay parks the call as a message
// schedule: while it waits it holds no slot of the pool's consumer, and
// when the schedule fires the call runs again.
func TestLongRetryDelayHoldsNoSlot(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	limited := tool.Must(tool.New("limited", func(context.Context, empty) (string, error) {
		if runs.Add(1) == 1 {
			return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Retryable: true, Message: "come back later",
				RetryAfter: 1500 * time.Millisecond, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
		}
		return "done", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	startCustomWorker(t, s, worker.Config{MaxInProcessDelay: 100 * time.Millisecond}, bus.PoolConfig{}, limited)
	ctx := t.Context()
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "limited"})
	require.NoError(t, err)

	// While the schedule waits, the call is acknowledged on the pool.
	require.Eventually(t, func() bool {
		info, err := s.Env.Bus.Retries.Info(ctx)
		return err == nil && info.State.Msgs >= 1
	}, 10*time.Second, 10*time.Millisecond)
	cons, err := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && runs.Load() == 1
	}, time.Second, 5*time.Millisecond, "a waiting retry holds no consumer slot")

	g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.True(t, g.Response.Ok, "%v", g.Response.Error)
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, int32(2), g.Response.Meta.Attempt)
}

// A call cancelled while its retry is parked is answered by the delivery
// the schedule makes, which runs nothing: its answer names no attempt
// (0), not its delivery count (1 again, the call being put back as a new
// message), which is the attempt the first delivery claimed with its
// STARTED. A result of a pool's key for an attempt another key claimed
// is not believed (internal/believed): with a key per worker, such an
// answer would be refused and the caller left to the overdue sweeper.
func TestAnAnswerWithoutARunNamesNoAttempt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	limited := tool.Must(tool.New("limited_then_cancelled", func(context.Context, empty) (string, error) {
		runs.Add(1)
		return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Retryable: true, Message: "come back later",
			RetryAfter: 2 * time.Second, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	startCustomWorker(t, s, worker.Config{MaxInProcessDelay: 100 * time.Millisecond}, bus.PoolConfig{}, limited)
	ctx := t.Context()
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "limited_then_cancelled"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := s.Env.Bus.Retries.Info(ctx)
		return err == nil && info.State.Msgs >= 1
	}, 10*time.Second, 10*time.Millisecond, "the retry is parked")
	_, err = s.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "stop waiting")
	require.NoError(t, err)

	g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.GetError().GetType(), "%v", g.Response)
	require.Equal(t, int32(1), runs.Load())
	require.Zero(t, g.Response.Meta.Attempt, "no attempt: the delivery that answered ran none")
}
