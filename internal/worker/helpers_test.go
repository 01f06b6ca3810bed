package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"

	"google.golang.org/protobuf/types/known/durationpb"
)

var dispatchIdentity = identity.Default

func durationpbNew(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// startCustomWorker starts a worker built with worker.New (for settings
// toolworker does not expose) serving tools on the stack's server; it is
// stopped when the test ends.
func startCustomWorker(t *testing.T, s *dispatchtest.Stack, cfg worker.Config, pool bus.PoolConfig, tools ...*tool.Tool) *worker.Worker {
	t.Helper()
	nat, err := native.New(tools...)
	require.NoError(t, err)
	pool.Type = toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	cfg.Pools = []worker.Pool{{Concurrency: 2, PoolConfig: pool}}
	cfg.Executors = map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat}
	cfg.Specs = nat.Specs()
	w, err := worker.New(s.Env.Open(t, "custom-worker"), cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	for _, tl := range tools {
		s.WaitTool(t, tl.Name())
	}
	return w
}
