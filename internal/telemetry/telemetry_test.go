package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestCarrierFindsTraceparentInAnySpelling(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"traceparent", "Traceparent", "TRACEPARENT"} {
		ctx := telemetry.Extract(context.Background(), nats.Header{key: {traceparent}})
		sc := trace.SpanContextFromContext(ctx)
		require.True(t, sc.IsValid(), key)
		require.True(t, sc.IsRemote(), key)
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String(), key)
	}
}

func TestInjectWritesLowerCaseAndNothingWithoutASpan(t *testing.T) {
	t.Parallel()
	require.Nil(t, telemetry.Inject(context.Background(), nil), "no span: no header map at all")

	ctx := telemetry.Extract(context.Background(), nats.Header{"traceparent": {traceparent}})
	h := telemetry.Inject(ctx, nil)
	require.Equal(t, traceparent, h.Get("traceparent"))
	require.NotContains(t, h, "Traceparent")
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := telemetry.WithTraceIDs(slog.New(slog.NewTextHandler(&buf, nil))).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()

	log.InfoContext(ctx, "with span")
	require.Contains(t, buf.String(), "trace_id="+span.SpanContext().TraceID().String())
	require.Contains(t, buf.String(), "span_id="+span.SpanContext().SpanID().String())
	require.Contains(t, buf.String(), "component=x")

	buf.Reset()
	log.InfoContext(context.Background(), "without")
	require.NotContains(t, buf.String(), "trace_id")
}

func TestSetupTracingIsOffUnlessAsked(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, m := range []map[string]string{{}, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}} {
		tr, err := telemetry.SetupTracing(t.Context(), "svc", env(m))
		require.NoError(t, err)
		require.Nil(t, tr.Provider, "%v", m)
	}
	_, err := telemetry.SetupTracing(t.Context(), "svc", env(map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}))
	require.Error(t, err)
	_, err = telemetry.SetupTracing(t.Context(), "svc", env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}))
	require.Error(t, err)
}
