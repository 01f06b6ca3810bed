package dispatch_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ghostSpec is a native tool's spec that no worker serves.
func ghostSpec(name string) *toolwirev1.ToolSpec {
	return &toolwirev1.ToolSpec{Name: name, Provider: "builtin", Summary: "s", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
		Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{}}, InputSchemaJson: `{"type":"object"}`}
}

// A tool registered with no pool consumer for its calls (a worker that
// published what it does not serve) is refused NOT_FOUND at admission,
// Call and Submit alike, and nothing is queued. Before, such calls were
// accepted and stayed PENDING for good. An audit's consumer over every
// call is no pool and does not count.
func TestCallNoPoolConsumesIsRefused(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	_, err := registry.Publish(ctx, s.Env.Bus.Registry, []*toolwirev1.ToolSpec{ghostSpec("ghost")})
	require.NoError(t, err)
	s.WaitTool(t, "ghost")
	audit, err := s.Env.Bus.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.Env.Bus.Subjects.AllCalls()}})
	require.NoError(t, err)
	_, err = audit.FetchNoWait(1)
	require.NoError(t, err)
	before, err := s.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)

	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "ghost", ArgumentsJson: `{}`})
	require.NoError(t, err)
	require.NotNil(t, sub.Rejected, "a call no pool consumes was accepted")
	e := sub.Rejected.GetError()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, e.GetType())
	require.False(t, e.GetRetryable())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, e.GetPartialSideEffects())
	require.Contains(t, e.GetMessage(), "no worker pool")
	require.Contains(t, e.GetSuggestion(), "start a worker")

	res, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "ghost", ArgumentsJson: `{}`}, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, res.Response.GetError().GetType())

	after, err := s.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, before.State.LastSeq, after.State.LastSeq, "nothing was queued")

	// A served tool is admitted as ever.
	ok, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, ok.Response.Ok, "%v", ok.Response.Error)
}

// A pool that starts after admission's view was listed is seen at once:
// its tool's first call, made the moment the tool is registered, runs.
// A pool whose consumer is deleted stops being admitted within the
// refresh period.
func TestPoolCheckFollowsPools(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: dispatch.Config{PoolCheck: time.Hour}})
	ctx := t.Context()
	// The view is listed (and a refusal keeps it fresh) before the pool
	// exists.
	_, err := registry.Publish(ctx, s.Env.Bus.Registry, []*toolwirev1.ToolSpec{ghostSpec("ghost")})
	require.NoError(t, err)
	s.WaitTool(t, "ghost")
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "ghost", ArgumentsJson: `{}`})
	require.NoError(t, err)
	require.NotNil(t, sub.Rejected)

	late := tool.Must(tool.New("late", func(context.Context, struct{}) (string, error) { return "late", nil }))
	stopPool := startPool(t, s, "late-pool", late) // creates its pool's consumer, then registers late
	s.WaitTool(t, "late")
	res, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "late", ArgumentsJson: `{}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, res.Response.Ok, "the new pool's first call: %v", res.Response.Error)

	// Another replica that lists every 50ms: once the pool's consumer is
	// deleted, its calls are refused.
	d2 := s.StartDispatcher(t, dispatch.Config{Name: "d2", PoolCheck: 50 * time.Millisecond})
	res, err = d2.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "late", ArgumentsJson: `{}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, res.Response.Ok, "%v", res.Response.Error)
	// The pool's worker is gone first: a running worker puts its deleted
	// consumer back (internal/worker, guard.go).
	stopPool()
	require.NoError(t, s.Env.Bus.Calls.DeleteConsumer(ctx, s.Env.Bus.Config.PoolConsumer("late-pool")))
	require.Eventually(t, func() bool {
		sub, err := d2.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "late", ArgumentsJson: `{}`})
		return err == nil && sub.Rejected.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND
	}, 10*time.Second, 20*time.Millisecond)
}

// startPool starts a worker serving tools in a native pool of its own,
// stopped when the test ends (or by the function it returns).
func startPool(t *testing.T, s *dispatchtest.Stack, pool string, tools ...*tool.Tool) func() {
	t.Helper()
	nat, err := native.New(tools...)
	require.NoError(t, err)
	w, err := worker.New(s.Env.Open(t, pool), worker.Config{
		Pools:     []worker.Pool{{Concurrency: 2, PoolConfig: bus.PoolConfig{Name: pool, Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat},
		Specs:     nat.Specs(), Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	}
	t.Cleanup(stop)
	return stop
}
