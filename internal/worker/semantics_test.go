package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type empty struct{}

func callTool(t *testing.T, s *dispatchtest.Stack, name string) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: name}, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	return r.Response
}

func fastRetry(max int32) tool.Option {
	return tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: max, InitialInterval: durationpb.New(time.Millisecond),
		MaxInterval: durationpb.New(5 * time.Millisecond)})
}

// Retryable errors of a tool that is safe to rerun are retried in-process
// with backoff, each attempt visible as an event.
func TestTransientErrorsAreRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	flaky := tool.Must(tool.New("flaky", func(context.Context, empty) (string, error) {
		if n.Add(1) < 3 {
			return "", tool.Transient(errors.New("upstream hiccup"))
		}
		return "ok", nil
	}, tool.Idempotent(), fastRetry(5)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{flaky}})
	r := callTool(t, s, "flaky")
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(3), n.Load())
	require.Equal(t, int32(3), r.Meta.Attempt)
}

func TestAttemptsAreBounded(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	down := tool.Must(tool.New("down", func(context.Context, empty) (string, error) {
		n.Add(1)
		return "", tool.Transient(errors.New("still down"))
	}, tool.ReadOnly(), fastRetry(4)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{down}})
	r := callTool(t, s, "down")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS, r.Error.Type)
	require.Contains(t, r.Error.Message, "still down")
	require.Equal(t, int32(4), n.Load())
	dls := waitDLQ(t, s, 1)
	require.Equal(t, "attempts exhausted", dls[0].Reason)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, dls[0].LastError.Type)
}

// A retryable error with possible side effects is not retried for a tool
// that is not idempotent: a rerun could duplicate the effect.
func TestSideEffectsForbidRetries(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	pay := tool.Must(tool.New("pay", func(context.Context, empty) (string, error) {
		n.Add(1)
		return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true, Message: "gateway timeout",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE}
	}, fastRetry(5)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{pay}})
	r := callTool(t, s, "pay")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, r.Error.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE, r.Error.PartialSideEffects)
	require.Equal(t, int32(1), n.Load())
}

// RATE_LIMIT waits retry_after without spending an attempt.
func TestRateLimitDoesNotSpendAttempts(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	limited := tool.Must(tool.New("limited", func(context.Context, empty) (string, error) {
		if n.Add(1) <= 3 {
			return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Retryable: true, Message: "slow down",
				RetryAfter: 2 * time.Millisecond, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
		}
		return "done", nil
	}, fastRetry(1)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{limited}})
	r := callTool(t, s, "limited")
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(4), n.Load())
}

func TestStartToCloseTimeout(t *testing.T) {
	t.Parallel()
	slow := tool.Must(tool.New("slow", func(ctx context.Context, _ empty) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, tool.WithTimeouts(0, 50*time.Millisecond, 0, 0), fastRetry(1)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{slow}})
	r := callTool(t, s, "slow")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, r.Error.Type)
}

// A tool silent past its heartbeat timeout is abandoned (TIMEOUT); one
// that reports progress keeps running.
func TestHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	silent := tool.Must(tool.New("silent", func(ctx context.Context, _ empty) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, tool.WithTimeouts(0, 0, 0, 50*time.Millisecond), fastRetry(1)))
	chatty := tool.Must(tool.New("chatty", func(ctx context.Context, _ empty) (string, error) {
		for i := range 10 {
			tool.Progress(ctx, "working", float64(i*10))
			select {
			case <-time.After(20 * time.Millisecond): // the work itself
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "finished", nil
	}, tool.WithTimeouts(0, 0, 0, 60*time.Millisecond), fastRetry(1)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{silent, chatty}})
	r := callTool(t, s, "silent")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, r.Error.Type)
	require.Contains(t, r.Error.Message, "heartbeat")
	r = callTool(t, s, "chatty")
	require.True(t, r.Ok, "%v", r.Error)
}

// Cancellation reaches running work: the tool's context is cancelled with
// the caller's cause and the answer is CANCELLED.
func TestCancelRunningCall(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	var stoppedAt atomic.Int64
	block := tool.Must(tool.New("block", func(ctx context.Context, _ empty) (string, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		stoppedAt.Store(time.Now().UnixNano())
		return "", ctx.Err()
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{block}})
	ctx := t.Context()
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "block"})
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(time.Minute): // a bound well below the package's, on any host
		t.Fatal("the call never started")
	}
	out, err := s.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "user hit stop")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, g.Response, "no result within a minute of the cancel")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.Error.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, g.Response.Error.PartialSideEffects)
	require.Equal(t, "local", g.Response.Meta.CancelledBy)
	require.Equal(t, "user hit stop", g.Response.Meta.CancelReason)
	require.NotZero(t, stoppedAt.Load())

	// Twice, after completion and unknown ids are harmless.
	out, err = s.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "again")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, out)
	out, err = s.Dispatcher.Cancel(ctx, identity.Default, "01J00000000000000000000009", "")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, out)
	out, err = s.Dispatcher.Cancel(ctx, identity.Default, "garbage", "")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, out)
}

// A call cancelled while queued is never executed.
func TestCancelQueuedCallNeverRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	count := tool.Must(tool.New("count", func(context.Context, empty) (string, error) {
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
	out, err := s.Dispatcher.Cancel(ctx, identity.Default, sub.CallID, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	s.StartWorker(t, count)
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.Error.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, g.Response.Error.PartialSideEffects)
	require.Zero(t, runs.Load())
}

// Watch streams a call's lifecycle, ending with FINISHED.
func TestWatch(t *testing.T) {
	t.Parallel()
	steps := tool.Must(tool.New("steps", func(ctx context.Context, _ empty) (string, error) {
		tool.Progress(ctx, "half way", 50)
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{steps}})
	ctx := t.Context()
	other := s.StartDispatcher(t, dispatch.Config{Name: "other"})
	sub, err := other.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "steps"})
	require.NoError(t, err)
	var types []toolwirev1.CallEventType
	err = s.Dispatcher.Watch(ctx, identity.Default, sub.CallID, func(ev *toolwirev1.CallEvent) error {
		types = append(types, ev.Type)
		if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED {
			require.True(t, ev.Response.Ok)
		}
		return nil
	})
	require.NoError(t, err)
	// ACCEPTED comes from the dispatcher's connection and STARTED from the
	// worker's, so their order is not fixed; FINISHED is always last.
	require.ElementsMatch(t, []toolwirev1.CallEventType{toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED}, types)
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, types[len(types)-1])
	err = s.Dispatcher.Watch(ctx, identity.Default, "01J00000000000000000000009", func(*toolwirev1.CallEvent) error { return nil })
	require.ErrorIs(t, err, dispatch.ErrUnknownCall)
}
