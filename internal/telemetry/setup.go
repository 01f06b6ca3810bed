package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is a process's trace pipeline, built by SetupTracing.
type Tracing struct {
	// Provider makes the spans; nil when tracing is off (components then
	// make no spans and inject no headers).
	Provider trace.TracerProvider
	// Exporter names what was configured: "none", "otlp/grpc" or
	// "otlp/http".
	Exporter string
	shutdown func(context.Context) error
}

// Shutdown flushes the spans still buffered and stops the exporter. It
// is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// SetupTracing builds the tracer provider the standard OTEL_* environment
// variables ask for (lookup is os.LookupEnv when nil):
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp, or unset with OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: OTLP, over
//     OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL
//     ("http/protobuf", the default, or "grpc"). The exporters read their
//     own endpoint, headers, timeout, TLS and compression variables.
//   - anything else: off. Unlike the SDK's default (otlp), nothing is
//     exported unless asked for.
//
// The resource carries service.name = serviceName unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES say otherwise; the sampler follows
// OTEL_TRACES_SAMPLER(_ARG) and the batcher OTEL_BSP_* (both read by the
// SDK). When tracing is on, the provider and the W3C propagator are also
// installed as the otel globals. An unsupported exporter or protocol is an
// error.
func SetupTracing(ctx context.Context, serviceName string, lookup func(string) (string, bool)) (*Tracing, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return &Tracing{Exporter: "none"}, nil
	}
	exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	if exporter == "" && (get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		exporter = "otlp"
	}
	switch exporter {
	case "", "none":
		return &Tracing{Exporter: "none"}, nil
	case "otlp":
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q is not supported (want otlp or none)", exporter)
	}
	protocol := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	var name string
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
		name = "otlp/http"
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
		name = "otlp/grpc"
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q is not supported (want http/protobuf or grpc)", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	return &Tracing{Provider: tp, Exporter: name, shutdown: tp.Shutdown}, nil
}

// Flush shuts t down within 5 seconds, flushing its spans, and logs a
// failure: the deferred end of a binary's tracing.
func (t *Tracing) Flush(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("flushing spans failed", "err", err)
	}
}
