package worker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The worker's observation is middleware around its steps (see
// internal/telemetry for the span tree and metric names):
//
//   - observeDeliveries wraps handle: in-flight gauge and redelivery count
//     per pool, and, with tracing on, the CONSUMER span of the delivery,
//     a child of the dispatcher's PRODUCER span found in the message's
//     headers;
//   - startAttempt/endAttempt bracket each attempt with a span, the parent
//     of the executor's execute_tool span (made by observed.Executor,
//     which also records the execution metrics);
//   - observeResults wraps the result publish: calls by outcome and the
//     end-to-end latency.

// observeDeliveries returns next wrapped for pool p, whose consumer is
// named consumer. It sets the delivery's context (its span) and count.
func (w *Worker) observeDeliveries(p Pool, consumer string, next func(*delivery)) func(*delivery) {
	pi := w.metrics.Pool(p.Name)
	return func(d *delivery) {
		pi.InFlight.Inc()
		defer pi.InFlight.Dec()
		msg := d.msg
		delivery := deliveryCount(msg)
		if delivery > 1 {
			pi.Redeliveries.Inc()
		}
		ctx := context.Background()
		if w.tracer != nil {
			var span trace.Span
			ctx, span = w.tracer.Start(telemetry.Extract(ctx, msg.Headers()), "process "+consumer,
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(telemetry.SystemNATS, telemetry.MessagingOperationName.String("process"),
					telemetry.MessagingOperationType.String("process"), telemetry.MessagingDestinationName.String(msg.Subject()),
					telemetry.MessagingConsumerGroupName.String(consumer), telemetry.MessagingDeliveryCount.Int(int(delivery)),
					telemetry.Pool.String(p.Name)))
			defer span.End()
		}
		d.ctx, d.count = ctx, delivery
		next(d)
	}
}

// annotateDelivery adds the decoded call's identity to the delivery span.
func (w *Worker) annotateDelivery(ctx context.Context, call *toolwirev1.ToolCall) {
	if w.tracer == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(telemetry.MessagingMessageID.String(call.CallId), telemetry.GenAIToolName.String(call.Tool),
			telemetry.GenAIToolCallID.String(call.CallId), telemetry.Tenant.String(call.GetCaller().GetTenant()))
	}
}

// startAttempt starts the span of one attempt (nil when tracing is off).
func (w *Worker) startAttempt(ctx context.Context, call *toolwirev1.ToolCall) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, nil
	}
	return w.tracer.Start(ctx, "attempt "+call.Tool, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(telemetry.Attempt.Int(int(call.Attempt)), telemetry.GenAIToolName.String(call.Tool),
			telemetry.GenAIToolCallID.String(call.CallId)))
}

// endAttempt ends an attempt's span with its outcome.
func endAttempt(span trace.Span, err error, abandoned bool) {
	if span == nil {
		return
	}
	switch {
	case abandoned:
		span.SetStatus(codes.Error, "abandoned: the execution ignored its context past the watchdog")
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// observeResults wraps a result publisher: a result the server stored is
// counted by tool, executor and outcome, and its end-to-end latency
// (admission to finish) observed. A result refused as a duplicate is not
// counted again.
func (w *Worker) observeResults(next func(context.Context, *toolwirev1.ToolCall, *toolwirev1.ToolResponse) error) func(context.Context, *toolwirev1.ToolCall, *toolwirev1.ToolResponse) error {
	return func(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
		err := next(ctx, call, resp)
		if err != nil {
			return err
		}
		e2e := time.Duration(-1)
		if a, f := resp.GetMeta().GetAcceptedAt(), resp.GetMeta().GetFinishedAt(); a != nil && f != nil {
			e2e = f.AsTime().Sub(a.AsTime())
		}
		w.metrics.Tool(call.Tool, call.Executor).Call(resp.GetError().GetType(), e2e)
		if w.tracer != nil {
			if span := trace.SpanFromContext(ctx); span.IsRecording() && !resp.Ok {
				span.SetAttributes(telemetry.ErrorType.String(telemetry.Outcome(resp.GetError().GetType())))
				span.SetStatus(codes.Error, resp.GetError().GetMessage())
			}
		}
		return nil
	}
}

// deliveryCount is how many times JetStream has delivered msg (1 when
// unknown). It reads the count from the ack subject itself, as
// jetstream.Msg.Metadata does, without building the whole metadata on
// every call:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>]
func deliveryCount(msg jetstream.Msg) int32 {
	reply := msg.Reply()
	pos := -1
	switch strings.Count(reply, ".") + 1 {
	case 9:
		pos = 4
	case 11, 12:
		pos = 6
	}
	if pos > 0 && strings.HasPrefix(reply, "$JS.ACK.") {
		tok := reply
		for range pos {
			_, tok, _ = strings.Cut(tok, ".")
		}
		tok, _, _ = strings.Cut(tok, ".")
		if n, err := strconv.ParseInt(tok, 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 0 {
		return int32(md.NumDelivered)
	}
	return 1
}
