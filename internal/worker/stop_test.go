package worker_test

import (
	"context"
	"sync"
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

// Stop is idempotent and safe to call concurrently: every call returns
// nil once the worker's goroutines have ended.
func TestStopIsIdempotent(t *testing.T) {
	t.Parallel()
	echo := tool.Must(tool.New("echo_stop", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, echo)
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo_stop", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = w.Stop(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, w.Stop(t.Context()), "again")
}

// A call still running when the grace period ends is cancelled with
// ErrShutdown and handed back, and Stop waits for its handler: nothing
// is left running, so Stop reports no error. The call runs again
// elsewhere.
func TestStopHandsBackAtTheEndOfTheGrace(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	slow := tool.Must(tool.New("slow_stop", func(ctx context.Context, _ empty) (string, error) {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done() // the first run lasts until the worker stops
			return "", ctx.Err()
		}
		return "second run", nil
	}, tool.Idempotent()))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	first := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, slow)
	sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "slow_stop"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	select {
	case <-started:
	case <-time.After(time.Minute): // far below the package's timeout
		t.Fatal("the call never ran")
	}
	grace, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, first.Stop(grace))
	require.Zero(t, first.InFlight())

	startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, slow)
	r, err := s.Dispatcher.GetResult(t.Context(), identity.Default, sub.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.EqualValues(t, 2, runs.Load())
}

// Stop waits for every goroutine the worker owns. An execution the
// watchdog abandoned runs until its tool returns: Stop gives up on it when
// its context ends and returns the context's error; once the tool has
// returned, Stop has nothing left to wait for.
func TestStopWaitsForAbandonedExecutions(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	runs := make(chan struct{}, 1)
	stuck := tool.Must(tool.New("stuck_stop", func(context.Context, empty) (string, error) {
		runs <- struct{}{}
		<-release // ignores its context
		return "late", nil
	}, tool.WithTimeouts(0, 50*time.Millisecond, 0, 0)))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{Watchdog: 100 * time.Millisecond}, bus.PoolConfig{AckWait: time.Minute}, stuck)
	sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stuck_stop"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	select {
	case <-runs:
	case <-time.After(time.Minute): // far below the package's timeout
		t.Fatal("the call never ran")
	}
	require.Eventually(t, func() bool { return w.Stats().Abandoned == 1 }, time.Minute, 10*time.Millisecond)

	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Stop(short), context.DeadlineExceeded, "the abandoned execution still runs")
	releaseOnce.Do(func() { close(release) })
	require.NoError(t, w.Stop(t.Context()), "a later Stop waits for it")
	require.NoError(t, w.Stop(t.Context()))
}
