package observed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/observed"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/pkg/tool"
)

// closing is an executor holding a resource: Close reports ctx's error
// and counts its calls.
type closing struct{ closed int }

func (*closing) Execute(context.Context, *executors.Request) (*tool.Result, error) {
	return &tool.Result{}, nil
}

func (c *closing) Close(ctx context.Context) error {
	c.closed++
	return ctx.Err()
}

// The decorator passes Close through to the executor it decorates, so
// whoever owns a decorated executor closes what it holds; an executor
// without Close is closed as a no-op.
func TestClosePassesThrough(t *testing.T) {
	t.Parallel()
	m, err := telemetry.NewWorkerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := &closing{}
	dec := observed.Executor(inner, nil, m)
	if err := executors.Close(t.Context(), dec); err != nil {
		t.Fatal(err)
	}
	if inner.closed != 1 {
		t.Fatalf("inner closed %d times, want 1", inner.closed)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := executors.Close(ended, dec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close returned %v, want the executor's error", err)
	}
	plain := observed.Executor(executors.Func(func(context.Context, *executors.Request) (*tool.Result, error) { return nil, nil }), nil, m)
	if err := executors.Close(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
}
