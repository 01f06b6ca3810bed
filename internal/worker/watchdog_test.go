package worker_test

import (
	"context"
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

// stuckTool is a tool that ignores its context (start-to-close 50 ms) until
// the test ends; runs receives a value as each execution starts.
func stuckTool(t *testing.T, name string) (*tool.Tool, chan struct{}) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	runs := make(chan struct{}, 4)
	return tool.Must(tool.New(name, func(context.Context, empty) (string, error) {
		runs <- struct{}{}
		<-release // ignores its context
		return "late", nil
	}, tool.WithTimeouts(0, 50*time.Millisecond, 0, 0))), runs
}

// An execution that ignores its context is abandoned by the watchdog:
// counted, heartbeats stopped, and the call moves on after AckWait — for a
// tool that is not idempotent, as UNKNOWN_OUTCOME, never a second run.
func TestWatchdogAbandonsStuckExecutions(t *testing.T) {
	t.Parallel()
	stuck, runs := stuckTool(t, "stuck")
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{Watchdog: 100 * time.Millisecond}, bus.PoolConfig{AckWait: time.Second}, stuck)

	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stuck"}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, r.Response.Error.Type)
	require.Len(t, runs, 1, "never run a second time")
	require.EqualValues(t, 1, w.Stats().Abandoned)
	require.EqualValues(t, 1, w.Stats().UnknownOutcomes)
}

// Abandoning an execution frees its slot in the pool: with every slot held
// by executions that ignore their context, other calls still run once the
// watchdog has given up on them.
func TestWatchdogFreesTheSlot(t *testing.T) {
	t.Parallel()
	stuck, runs := stuckTool(t, "stuck_slot")
	echo := tool.Must(tool.New("echo_slot", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{Watchdog: 100 * time.Millisecond}, bus.PoolConfig{AckWait: time.Minute}, stuck, echo)
	for range 2 { // the pool's two slots
		sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stuck_slot"})
		require.NoError(t, err)
		require.Nil(t, sub.Rejected)
	}
	for range 2 {
		select {
		case <-runs:
		case <-time.After(time.Minute): // far below the package's timeout
			t.Fatal("the stuck calls never ran")
		}
	}
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo_slot", ArgumentsJson: `{"text":"through"}`}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	// The echo took the first slot freed; the second stuck call is
	// abandoned at its own watchdog, which a busy machine may reach later.
	require.Eventually(t, func() bool { return w.Stats().Abandoned == 2 }, 30*time.Second, 10*time.Millisecond,
		"abandoned: %d", w.Stats().Abandoned)
}
