// Package observed decorates an executor with its observation: the
// execute_tool span and the execution metrics of every attempt
// (telemetry.WorkerMetrics). The executor is not changed and never sees
// the difference: observability stays out of executors (STYLE habit 10).
// It is a package of its own so that telemetry, which the dispatcher core
// uses too, does not depend on the executor seam.
package observed

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Executor decorates e with the observation of every attempt: an
// `execute_tool <tool>` span (GenAI semantic conventions; a child of the
// span in ctx, which the worker makes per attempt) when tracer is not nil,
// and the execution metrics of m: outcome and duration, the queue wait of
// a first attempt, and the count of later attempts. e is not changed and
// never sees the difference: observability stays out of executors.
func Executor(e executors.Executor, tracer trace.Tracer, m *telemetry.WorkerMetrics) executors.Executor {
	return &observedExecutor{next: e, tracer: tracer, m: m}
}

type observedExecutor struct {
	next   executors.Executor
	tracer trace.Tracer
	m      *telemetry.WorkerMetrics
}

// Unwrap returns the decorated executor.
func (x *observedExecutor) Unwrap() executors.Executor { return x.next }

// Close closes the decorated executor if it is an executors.Closer: the
// decoration holds nothing of its own.
func (x *observedExecutor) Close(ctx context.Context) error { return executors.Close(ctx, x.next) }

func (x *observedExecutor) Execute(ctx context.Context, req *executors.Request) (res *tool.Result, err error) {
	ti := x.m.Tool(req.Spec.GetName(), req.Spec.GetExecutor())
	start := time.Now()
	if req.Call.GetAttempt() <= 1 {
		if a := req.Call.GetAcceptedAt(); a != nil {
			ti.QueueWait(start.Sub(a.AsTime()))
		}
	} else {
		ti.Retry()
	}
	var span trace.Span
	if x.tracer != nil {
		ctx, span = x.tracer.Start(ctx, "execute_tool "+req.Spec.GetName(), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(telemetry.OpExecuteTool, telemetry.GenAIToolName.String(req.Spec.GetName()), telemetry.GenAIToolCallID.String(req.Call.GetCallId()),
				telemetry.GenAIToolType.String("function"), telemetry.ExecutorType.String(telemetry.ExecutorLabel(req.Spec.GetExecutor())), telemetry.Attempt.Int(int(req.Call.GetAttempt()))))
	}
	panicked := true
	defer func() {
		outcome := toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED
		switch {
		case panicked:
			outcome = toolwirev1.ErrorType_ERROR_TYPE_INTERNAL
		case err != nil:
			outcome = tool.AsError(ctx, err).Type
		}
		ti.Execution(outcome, time.Since(start))
		if span != nil {
			if outcome != toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED {
				span.SetAttributes(telemetry.ErrorType.String(telemetry.Outcome(outcome)))
				msg := "panic"
				if err != nil {
					msg = err.Error()
				}
				span.SetStatus(codes.Error, msg)
			}
			span.End()
		}
	}()
	res, err = x.next.Execute(ctx, req)
	panicked = false
	return res, err
}
