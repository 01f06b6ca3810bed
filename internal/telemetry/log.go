package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps a slog.Handler and adds trace_id and span_id to every
// record logged with a context that carries a valid span context (use the
// …Context logging methods). Without one it adds nothing and costs one
// context lookup.
type LogHandler struct{ inner slog.Handler }

// NewLogHandler wraps h; wrapping a LogHandler again returns it unchanged.
func NewLogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(LogHandler); ok {
		return h
	}
	return LogHandler{inner: h}
}

// WithTraceIDs returns l logging through a LogHandler.
func WithTraceIDs(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(LogHandler); ok {
		return l
	}
	return slog.New(NewLogHandler(l.Handler()))
}

// Enabled reports whether the wrapped handler logs level.
func (h LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the trace ids of ctx, then hands the record on.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs wraps the wrapped handler's WithAttrs.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return LogHandler{inner: h.inner.WithAttrs(attrs)}
}

// WithGroup wraps the wrapped handler's WithGroup (the trace ids then land
// inside the group).
func (h LogHandler) WithGroup(name string) slog.Handler {
	return LogHandler{inner: h.inner.WithGroup(name)}
}
