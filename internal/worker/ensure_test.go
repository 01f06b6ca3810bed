package worker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Ensure leaves the pool's consumer and the registered tool behind, as a
// deployment step for a pool scaled to zero, without fetching a call.
func TestEnsureCreatesConsumerAndPublishesWithoutServing(t *testing.T) {
	t.Parallel()
	echo := tool.Must(tool.New("ensure_echo", func(_ context.Context, in struct{ Text string }) (string, error) { return in.Text, nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	b := s.Env.Open(t, "ensure")
	nat, err := native.New(echo)
	require.NoError(t, err)
	w, err := worker.New(b, worker.Config{
		Pools:     []worker.Pool{{PoolConfig: bus.PoolConfig{Name: "search", Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat},
		Specs:     nat.Specs(),
	})
	require.NoError(t, err)

	require.NoError(t, w.Ensure(t.Context()))
	s.WaitTool(t, "ensure_echo")
	cons, err := b.Calls.Consumer(t.Context(), b.Config.PoolConsumer("search"))
	require.NoError(t, err)
	info := cons.CachedInfo()
	require.Equal(t, "toolwire_pool_search", info.Name)
	spec := nat.Specs()[0]
	require.Equal(t, []string{b.Subjects.ToolSubject(spec.Executor, spec.Provider, spec.Name)}, bus.ConsumerFilters(info.Config))
	require.Zero(t, info.NumWaiting, "no pull request: Ensure does not fetch")

	require.NoError(t, w.Stop(t.Context()), "Stop after Ensure is a no-op")
	require.Error(t, w.Start(t.Context()), "a stopped worker does not start")
	require.Error(t, w.Ensure(t.Context()), "Ensure on a stopped worker")
}
