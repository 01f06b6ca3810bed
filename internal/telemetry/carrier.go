package telemetry

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier adapts nats.Header to propagation.TextMapCarrier.
//
// propagation.HeaderCarrier is not used on purpose: it goes through
// http.Header, which canonicalises keys ("traceparent" → "Traceparent"),
// while NATS headers are case-sensitive and W3C propagators write
// lower-case keys, so a lower-case traceparent set by any other NATS
// client would be missed. Set stores the key as given; Get tries the
// exact key first (the common case, no allocation) and then any spelling.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, matched exactly or else
// case-insensitively.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces the values of key, spelled exactly as given.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the keys present.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// propagator is W3C trace context only: nothing else crosses the hop.
var propagator = propagation.TraceContext{}

// Inject writes the trace context of ctx's span into h, creating h when it
// is nil, and returns it. It writes nothing (and allocates nothing) when
// ctx carries no valid span context — always the case with tracing off. An
// unsampled span context is still propagated so that the consumer keeps
// the producer's sampling decision instead of making its own.
func Inject(ctx context.Context, h nats.Header) nats.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	propagator.Inject(ctx, HeaderCarrier(h))
	return h
}

// Extract returns ctx with the remote span context found in h, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}

// CopyTraceContext returns dst with the W3C trace context headers of src
// (traceparent, tracestate), creating dst when needed; without a
// traceparent in src it returns dst unchanged. It lets a component that
// republishes a message (the retry mover) keep the message's trace without
// making spans of its own.
func CopyTraceContext(dst, src nats.Header) nats.Header {
	c := HeaderCarrier(src)
	tp := c.Get("traceparent")
	if tp == "" {
		return dst
	}
	if dst == nil {
		dst = nats.Header{}
	}
	dst["traceparent"] = []string{tp}
	if ts := c.Get("tracestate"); ts != "" {
		dst["tracestate"] = []string{ts}
	}
	return dst
}
