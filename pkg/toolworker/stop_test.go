package toolworker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// A call that ignores its context outlives the grace period: Run stops
// anyway (the worker gives up on it), still drains its connection and
// reports the grace period's error rather than nil.
func TestRunReportsACallThatWouldNotStop(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	runs := make(chan struct{}, 1)
	stuck := tool.Must(tool.New("stuck_run", func(context.Context, struct{}) (string, error) {
		runs <- struct{}{}
		<-release // ignores its context
		return "late", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Tools: []*tool.Tool{stuck}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- toolworker.Run(ctx, toolworker.Options{SigningKey: s.WorkerKeyFile, NATSURL: s.Env.URL, Tools: []*tool.Tool{stuck}, Ready: ready,
			Grace: 100 * time.Millisecond})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the worker ended: %v", err)
	}
	s.WaitTool(t, "stuck_run")
	sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stuck_run"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	select {
	case <-runs:
	case <-time.After(time.Minute):
		t.Fatal("the call never ran")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the call still runs")
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
}
