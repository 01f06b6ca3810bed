package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// changingSpecs is a SpecSource whose specs the test sets.
type changingSpecs struct {
	mu      sync.Mutex
	specs   []*toolwirev1.ToolSpec
	changed chan struct{}
}

func (c *changingSpecs) Specs() []*toolwirev1.ToolSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specs
}

func (c *changingSpecs) Changed() <-chan struct{} { return c.changed }

func (c *changingSpecs) set(specs ...*toolwirev1.ToolSpec) {
	c.mu.Lock()
	c.specs = specs
	c.mu.Unlock()
	c.changed <- struct{}{}
}

// A worker serves tools a SpecSource adds after it started, including in
// a pool that had no tool at start, and serves a changed version.
func TestSpecSourcesChangeWhatIsServed(t *testing.T) {
	t.Parallel()
	answer := func(text string) func(context.Context, empty) (string, error) {
		return func(context.Context, empty) (string, error) { return text, nil }
	}
	a := tool.Must(tool.New("late_a", answer("a")))
	b := tool.Must(tool.New("late_b", answer("b")))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	src := &changingSpecs{changed: make(chan struct{})}
	w, err := worker.New(s.Env.Open(t, "w"), worker.Config{
		Pools:       []worker.Pool{{PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors:   nativeExecs(t, a, b),
		SpecSources: []worker.SpecSource{src},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})

	src.set(a.Spec())
	s.WaitTool(t, "late_a")
	require.Equal(t, "a", callTool(t, s, "late_a").Content[0].GetText().GetText())

	src.set(a.Spec(), b.Spec())
	s.WaitTool(t, "late_b")
	require.Equal(t, "b", callTool(t, s, "late_b").Content[0].GetText().GetText())
	require.Equal(t, "a", callTool(t, s, "late_a").Content[0].GetText().GetText())

	// A changed definition (here: a new description) is served at its new
	// version.
	changed := b.Spec()
	changed.Description = "b, described anew"
	src.set(a.Spec(), changed)
	require.Eventually(t, func() bool {
		e, err := s.Registry.Get("late_b")
		return err == nil && e.Spec.Description == changed.Description
	}, 10*time.Second, 5*time.Millisecond)
	r := callTool(t, s, "late_b")
	require.True(t, r.Ok, "%v", r.Error)
}
