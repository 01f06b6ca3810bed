package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A retry too long to wait in-process is parked as a message schedule and
// put back by the dispatcher's mover; the trace context rides along, so
// the second delivery is still in the call's trace, a child of the
// delivery that parked it:
//
//	admit → send → process (delivery 1) ─┬─ attempt 1 → execute_tool (error)
//	                                     └─ process (the put-back call) → attempt 2 → execute_tool (ok)
func TestTraceSurvivesAScheduledRetry(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	var runs atomic.Int32
	later := tool.Must(tool.New("later", func(_ context.Context, in input) (string, error) {
		if runs.Add(1) == 1 {
			return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Retryable: true, Message: "come back in a second",
				RetryAfter: time.Second, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
		}
		return in.Text, nil
	}, tool.WithDescription("Asks to be retried after a second, once.")))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Tools: []*tool.Tool{later}})
	nat, err := native.New(later)
	require.NoError(t, err)
	w, err := worker.New(s.Env.Open(t, "scheduling-worker"), worker.Config{
		Pools:     []worker.Pool{{PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat},
		Specs:     nat.Specs(), MaxInProcessDelay: time.Millisecond, TracerProvider: tp,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	d := s.StartDispatcher(t, dispatch.Config{TracerProvider: tp})
	s.WaitTool(t, "later")

	a, err := structpb.NewStruct(map[string]any{"text": "now"})
	require.NoError(t, err)
	r, err := d.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "later", Arguments: a}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.Equal(t, int32(2), r.Response.Meta.Attempt)

	var byName map[string][]sdktrace.ReadOnlySpan
	eventually(t, func() error {
		byName = map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			byName[strings.Fields(s.Name())[0]] = append(byName[strings.Fields(s.Name())[0]], s)
		}
		if len(byName["process"]) != 2 || len(byName["execute_tool"]) != 2 {
			return fmt.Errorf("spans so far: %v", byName)
		}
		return nil
	})
	traceID := byName["admit"][0].SpanContext().TraceID()
	for _, ss := range byName {
		for _, s := range ss {
			require.Equal(t, traceID, s.SpanContext().TraceID(), "span %q is in another trace", s.Name())
		}
	}
	send := byName["send"][0]
	var first, second sdktrace.ReadOnlySpan
	for _, p := range byName["process"] {
		if p.Parent().SpanID() == send.SpanContext().SpanID() {
			first = p
		} else {
			second = p
		}
	}
	require.NotNil(t, first, "the first delivery is a child of the publish")
	require.NotNil(t, second)
	require.Equal(t, first.SpanContext().SpanID(), second.Parent().SpanID(), "the put-back delivery is a child of the one that parked it")
	for _, at := range byName["attempt"] {
		want := first
		if attr(at, "toolwire.attempt") == "2" {
			want = second
		}
		require.Equal(t, want.SpanContext().SpanID(), at.Parent().SpanID())
	}
}
