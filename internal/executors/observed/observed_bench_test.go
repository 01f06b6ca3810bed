package observed_test

import (
	"context"
	"testing"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/observed"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkExecutorDecorator measures what the decorator adds to one
// attempt with tracing off (metrics only): the figure behind "no cost".
func BenchmarkExecutorDecorator(b *testing.B) {
	m, err := telemetry.NewWorkerMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	res := &tool.Result{}
	inner := executors.Func(func(context.Context, *executors.Request) (*tool.Result, error) { return res, nil })
	req := &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "c", Tool: "noop", Attempt: 1, AcceptedAt: timestamppb.Now()},
		Spec: &toolwirev1.ToolSpec{Name: "noop", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE},
	}
	for _, c := range []struct {
		name string
		e    executors.Executor
	}{{"bare", inner}, {"decorated", observed.Executor(inner, nil, m)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.e.Execute(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
