package dispatch

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The dispatcher's observation wraps submission (see internal/telemetry
// for the span tree and the metric names): an admission span around
// admitAndPublish with the admission metrics, and a PRODUCER span around
// the call's publish whose context travels in the message headers.

// startAdmission starts the admission span (nil when tracing is off).
func (d *Dispatcher) startAdmission(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	return d.tracer.Start(ctx, "admit", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(telemetry.GenAIToolName.String(o.Tool), telemetry.Tenant.String(id.Tenant)))
}

// endAdmission records the admission's outcome in the metrics and ends
// its span.
func (d *Dispatcher) endAdmission(span trace.Span, s *Submitted, err error, start time.Time) {
	outcome := telemetry.AdmissionAccepted
	switch {
	case err != nil:
		outcome = telemetry.AdmissionError
		d.metrics.Admitted(outcome, 0)
	case s.Rejected != nil:
		outcome = telemetry.AdmissionRejected
		d.metrics.Rejected(s.Rejected.GetError().GetType())
	case s.Duplicate:
		outcome = telemetry.AdmissionDuplicate
		d.metrics.Admitted(outcome, 0)
	case s.Awaiting != nil:
		outcome = telemetry.AdmissionAwaitingApproval
		d.metrics.Admitted(outcome, 0)
	default:
		d.metrics.Admitted(outcome, time.Since(start))
	}
	if span == nil {
		return
	}
	span.SetAttributes(telemetry.AdmissionOutcome.String(outcome))
	if s != nil {
		span.SetAttributes(telemetry.GenAIToolCallID.String(s.CallID))
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case s.Rejected != nil:
		span.SetAttributes(telemetry.ErrorType.String(telemetry.Outcome(s.Rejected.GetError().GetType())))
		span.SetStatus(codes.Error, s.Rejected.GetError().GetMessage())
	}
	span.End()
}

// publishSpan is the PRODUCER span of a call's publish; its zero value
// (tracing off) does nothing.
type publishSpan struct {
	span trace.Span
	// header carries the span's trace context; nil when tracing is off.
	header nats.Header
}

// startPublish starts the PRODUCER span of publishing call on subject and
// prepares the headers that carry its context.
func (d *Dispatcher) startPublish(ctx context.Context, subject string, call *toolwirev1.ToolCall) (context.Context, publishSpan) {
	if d.tracer == nil {
		return ctx, publishSpan{}
	}
	ctx, span := d.tracer.Start(ctx, "send "+d.callsStream, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.SystemNATS, telemetry.MessagingOperationName.String("send"),
			telemetry.MessagingOperationType.String("send"), telemetry.MessagingDestinationName.String(subject),
			telemetry.MessagingMessageID.String(call.CallId), telemetry.GenAIToolName.String(call.Tool),
			telemetry.GenAIToolCallID.String(call.CallId)))
	return ctx, publishSpan{span: span, header: telemetry.Inject(ctx, nil)}
}

func (p publishSpan) fail(err error) {
	if p.span != nil {
		p.span.SetStatus(codes.Error, err.Error())
	}
}

func (p publishSpan) end() {
	if p.span != nil {
		p.span.End()
	}
}
