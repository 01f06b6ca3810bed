package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// lastEvent returns the newest event recorded for a call, or nil when
// there is none; an error means the answer is unknown. It reads the
// events stream's leader: a replica that lags could miss the STARTED
// event that makes a rerun unsafe.
func (w *Worker) lastEvent(ctx context.Context, call *toolwirev1.ToolCall) (*toolwirev1.CallEvent, error) {
	m, err := bus.LastMsgFromLeader(ctx, w.bus.JS, w.bus.Events, w.bus.Subjects.EventsAnyDispatcher(call.Caller.GetTenant(), call.CallId))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ev, believed, err := w.checkEvent(ctx, call, m)
	if err != nil {
		return nil, err
	}
	if !believed || !attemptEventType(ev.Type) {
		// Admission and cancel records say nothing about attempts, and
		// come from other connections, so they may land after an attempt's
		// STARTED; and an event that is not believed says nothing: look at
		// every event.
		return w.lastAttemptEvent(ctx, call)
	}
	return ev, nil
}

// checkEvent decodes m, an event of call, and says whether it is
// believed (internal/believed): an event a worker credential wrote
// without an enrolled key must not make a call that is not safe to rerun
// look started (an undecodable one is not believed either: toolwire
// writes none). An error says the check could not be made.
func (w *Worker) checkEvent(ctx context.Context, call *toolwirev1.ToolCall, m *jetstream.RawStreamMsg) (*toolwirev1.CallEvent, bool, error) {
	ev, _, err := believed.CheckEvent(ctx, w.bus.Keys, call.CallId, call.Tool, m.Header, m.Data)
	if se := signing.AsError(err); se != nil {
		w.log.WarnContext(ctx, "an event that is not believed is stored for a call; ignoring it", "call_id", call.CallId,
			"seq", m.Sequence, "problem", se.Problem, "err", se)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return ev, true, nil
}

// lastAttemptEvent scans a call's events for the newest believed attempt
// event; it runs only for redeliveries whose newest event is not an
// attempt's. A scan cut short is an error, never "no attempt": a STARTED
// it did not reach would let a tool that is not safe to rerun run again.
// It reads from the leader of EVENTS (a lagging replica could miss a
// stored STARTED), by gets, not a consumer: a worker's credentials may
// create no consumer on EVENTS (bus.RoleWorker).
func (w *Worker) lastAttemptEvent(ctx context.Context, call *toolwirev1.ToolCall) (*toolwirev1.CallEvent, error) {
	msgs, err := bus.AllMsgsFromLeader(ctx, w.bus.JS, w.bus.Events, w.bus.Subjects.EventsAnyDispatcher(call.Caller.GetTenant(), call.CallId))
	if err != nil {
		return nil, fmt.Errorf("worker: scan events: %w", err)
	}
	var last *toolwirev1.CallEvent
	for _, m := range msgs {
		ev, ok, err := w.checkEvent(ctx, call, m)
		if err != nil {
			return nil, fmt.Errorf("worker: scan events: %w", err)
		}
		if ok && attemptEventType(ev.Type) {
			last = ev
		}
	}
	return last, nil
}

// attemptEvent records an attempt's event. For tools that are not safe to
// rerun the event is stored durably before the attempt proceeds, so a
// crash mid-attempt is known as an unknown outcome afterwards; for safe
// tools it is a cheap best-effort publish. It returns an error when a
// durable event was not stored (or may not have been: no answer); the
// caller decides what must not happen without it.
func (w *Worker) attemptEvent(ctx context.Context, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, ev *toolwirev1.CallEvent) error {
	if safeToRerun(spec) {
		w.publishEvent(call, ev)
		return nil
	}
	_, err := w.durableEvent(ctx, call, ev, settleTimeout)
	return err
}

// durableEvent publishes ev and waits, at most timeout, until the events
// stream has stored it; it returns the event's stream sequence.
func (w *Worker) durableEvent(ctx context.Context, call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent, timeout time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seq, err := w.storeEvent(ctx, call, ev)
	if err != nil {
		w.log.WarnContext(ctx, "durable event not stored", "call_id", call.CallId, "type", ev.Type, "err", err)
	}
	return seq, err
}

// storeEvent publishes ev with opts and waits until the events stream
// has stored it (or ctx ends); it returns the event's stream sequence.
func (w *Worker) storeEvent(ctx context.Context, call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent, opts ...jetstream.PublishOpt) (uint64, error) {
	w.redactEvent(call, ev)
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	var ack *jetstream.PubAck
	if err == nil {
		ack, err = w.bus.JS.PublishMsg(ctx, w.signedEvent(call, ev, data), opts...)
	}
	if err != nil {
		w.log.DebugContext(ctx, "durable event not stored", "call_id", call.CallId, "type", ev.Type, "err", err)
		return 0, fmt.Errorf("worker: %s event not stored: %w", ev.Type, err)
	}
	return ack.Sequence, nil
}

// eventSubject is the subject of a call's events: the same for every
// delivery of the call, since it names the dispatcher that admitted it.
func (w *Worker) eventSubject(call *toolwirev1.ToolCall) string {
	return w.bus.Subjects.Event(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
}

// attemptEventType says whether an event of type t is written by an
// attempt (not by admission or a cancel request).
func attemptEventType(t toolwirev1.CallEventType) bool {
	return t != toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED && t != toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED
}

// startedEventDelay is how long a safe-to-rerun attempt runs before its
// STARTED event is published.
const startedEventDelay = 100 * time.Millisecond

// publishEvent publishes an event of call, best effort: a core publish
// the events stream captures.
func (w *Worker) publishEvent(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) {
	w.redactEvent(call, ev)
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	if err != nil {
		return
	}
	if err := w.bus.NC.PublishMsg(w.signedEvent(call, ev, data)); err != nil {
		w.log.Debug("publish event failed", "call_id", call.CallId, "err", err)
	}
}

// publishProgress publishes a PROGRESS event of call with a JetStream
// publish whose acknowledgement it does not wait for: the reporter waits
// for the last one before the result (reporter.settle), so that whoever
// reads the result finds the progress stored. When the publish cannot be
// started (too many pending), it is a core publish, and nil is returned.
func (w *Worker) publishProgress(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) jetstream.PubAckFuture {
	w.redactEvent(call, ev)
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil
	}
	msg := w.signedEvent(call, ev, data)
	f, err := w.bus.JS.PublishMsgAsync(msg)
	if err == nil {
		return f
	}
	if err := w.bus.NC.PublishMsg(msg); err != nil {
		w.log.Debug("publish event failed", "call_id", call.CallId, "err", err)
	}
	return nil
}

// signedEvent is the message of ev (data) of call, signed with the
// worker's key (internal/signing).
func (w *Worker) signedEvent(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent, data []byte) *nats.Msg {
	return w.bus.Signer.SignedMsg(w.eventSubject(call), signing.KindEvent, call.CallId, ev.Attempt, data, nil)
}

// unknownOutcome reports whether the last recorded event says an attempt
// started and may have had effects without leaving a result.
func unknownOutcome(prev *toolwirev1.CallEvent) bool {
	if prev == nil {
		return false
	}
	switch prev.Type {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS:
		return true
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING:
		return prev.GetError().GetPartialSideEffects() != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return false
}

// unknownOutcomeError is the answer to a call of a tool that is not safe
// to rerun whose last attempt event prev says the attempt may have had
// effects without leaving a result: what is known of that attempt.
func unknownOutcomeError(prev *toolwirev1.CallEvent) *toolwirev1.ToolError {
	at := "an unrecorded time"
	if prev.GetTime() != nil {
		at = prev.GetTime().AsTime().UTC().Format(time.RFC3339Nano)
	}
	var msg string
	switch prev.Type {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING:
		msg = fmt.Sprintf("attempt %d on worker %q ended at %s without a result, with partial side effects %s (%s)",
			prev.Attempt, prev.Worker, at, prev.GetError().GetPartialSideEffects(), prev.Message)
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS:
		msg = fmt.Sprintf("attempt %d was running on worker %q (its last progress at %s) and no end or result was recorded for it: "+
			"it may still be running, or may have run", prev.Attempt, prev.Worker, at)
	default:
		msg = fmt.Sprintf("attempt %d started at %s on worker %q and no end or result was recorded for it: it may still be running, or may have run",
			prev.Attempt, at, prev.Worker)
	}
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME,
		Message:            msg + "; the tool is not idempotent, so it is not run again",
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
		Suggestion:         "check the tool's target for the effect before calling again"}
}

// sideEffectsOf says what earlier attempts may have changed, by the last
// attempt event.
func sideEffectsOf(prev *toolwirev1.CallEvent) toolwirev1.PartialSideEffects {
	if unknownOutcome(prev) {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
}
