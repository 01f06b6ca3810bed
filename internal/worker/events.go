package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/envelope"
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
	ev := &toolwirev1.CallEvent{}
	if proto.Unmarshal(m.Data, ev) != nil {
		// Unreadable: assume the worst, an attempt started.
		return &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED}, nil
	}
	if !attemptEventType(ev.Type) {
		// Admission and cancel records say nothing about attempts, and
		// come from other connections, so they may land after an attempt's
		// STARTED: look at every event.
		return w.lastAttemptEvent(ctx, call)
	}
	return ev, nil
}

// lastAttemptEvent scans a call's events for the newest attempt event; it
// runs only for redeliveries whose newest event is not an attempt's. A
// scan cut short is an error, never "no attempt": a STARTED it did not
// reach would let a tool that is not safe to rerun run again. It reads
// from the leader of EVENTS (a lagging replica could miss a stored
// STARTED), by gets, not a consumer: a worker's credentials may create no
// consumer on EVENTS (bus.RoleWorker).
func (w *Worker) lastAttemptEvent(ctx context.Context, call *toolwirev1.ToolCall) (*toolwirev1.CallEvent, error) {
	msgs, err := bus.AllMsgsFromLeader(ctx, w.bus.JS, w.bus.Events, w.bus.Subjects.EventsAnyDispatcher(call.Caller.GetTenant(), call.CallId))
	if err != nil {
		return nil, fmt.Errorf("worker: scan events: %w", err)
	}
	var last *toolwirev1.CallEvent
	for _, m := range msgs {
		ev := &toolwirev1.CallEvent{}
		if proto.Unmarshal(m.Data, ev) == nil && attemptEventType(ev.Type) {
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
	w.redactEvent(call, ev)
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	var ack *jetstream.PubAck
	if err == nil {
		ack, err = w.bus.JS.Publish(ctx, w.eventSubject(call), data)
	}
	if err != nil {
		w.log.WarnContext(ctx, "durable event not stored", "call_id", call.CallId, "type", ev.Type, "err", err)
		return 0, fmt.Errorf("worker: %s event not stored: %w", ev.Type, err)
	}
	return ack.Sequence, nil
}

// eventSubject is the subject of a call's events: the same for every
// delivery of the call, since it names the dispatcher that admitted it.
func (w *Worker) eventSubject(call *toolwirev1.ToolCall) string {
	return w.bus.Subjects.Event(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
}

// errClaimLost says another delivery of the call recorded the start of
// this attempt (or a later one) before this delivery did.
var errClaimLost = errors.New("worker: another delivery of the call started it first")

// durableStart stores the STARTED event of an attempt of a tool that is
// not safe to rerun, then makes sure this delivery is the one that
// started it. Two deliveries of one call can both pass the look at the
// call's events (handle): a worker that stalls past AckWait before its
// STARTED is stored (a long GC pause, SIGSTOP, a leader election) and the
// redelivery that JetStream hands to another worker meanwhile. Both then
// store a STARTED for the same attempt; the stream orders them, and the
// one stored first wins. The loser returns errClaimLost and must neither
// run nor settle the call: its delivery is stale, or, if it is not, the
// next delivery reads the winner's STARTED. When the events cannot be
// read back it returns errStartUnconfirmed.
//
// after is the sequence of this delivery's previous STARTED (an
// in-process retry), 0 for its first attempt: a competing STARTED of this
// attempt or a later one can only be stored after it, so the events
// before it are not read again. durableStart returns the sequence of the
// STARTED it stored.
func (w *Worker) durableStart(ctx context.Context, call *toolwirev1.ToolCall, after uint64) (uint64, error) {
	seq, err := w.durableEvent(ctx, call, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED}, settleTimeout)
	if err != nil {
		return 0, err
	}
	earlier, err := w.eventsBetween(ctx, call, after+1, seq)
	if err != nil {
		return seq, fmt.Errorf("%w: %w", errStartUnconfirmed, err)
	}
	for _, m := range earlier {
		ev := &toolwirev1.CallEvent{}
		if proto.Unmarshal(m.Data, ev) != nil {
			return seq, fmt.Errorf("%w (an unreadable event at %d)", errClaimLost, m.Sequence)
		}
		if attemptEventType(ev.Type) && ev.Attempt >= call.Attempt {
			return seq, fmt.Errorf("%w (%s of attempt %d by %q at %d)", errClaimLost, ev.Type, ev.Attempt, ev.Worker, m.Sequence)
		}
	}
	return seq, nil
}

// eventsBetween reads a call's events stored from sequence from up to
// before, from the leader, for at most settleTimeout. The leader that
// stored the last of them may be gone the moment after, and the others
// do not answer until one of them leads: each read gets readBackTry, and
// a read that fails is tried again.
func (w *Worker) eventsBetween(ctx context.Context, call *toolwirev1.ToolCall, from, before uint64) ([]*jetstream.RawStreamMsg, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, min(time.Until(deadline), readBackTry))
		msgs, err := bus.MsgsBetweenFromLeader(rctx, w.bus.JS, w.bus.Events, w.eventSubject(call), from, before)
		cancel()
		if err == nil {
			return msgs, nil
		}
		if time.Until(deadline) < readBackRetry {
			return nil, err
		}
		t := time.NewTimer(readBackRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// errStartUnconfirmed says an attempt's STARTED was stored but the events
// before it could not be read back: the attempt must not run, no note
// that it did not run may be written (another delivery may be running
// it), and the delivery is left unsettled, like a lost claim: a nak would
// act even if this delivery is stale, and hand the call to a third
// worker while the winner runs it. The call's next delivery, after
// AckWait, reads this STARTED as an attempt of unknown outcome.
var errStartUnconfirmed = errors.New("worker: STARTED stored but not read back")

// Reading back a call's events after its STARTED was stored: each read
// gets readBackTry, and a failed one is tried again after readBackRetry.
const (
	readBackTry   = 2 * time.Second
	readBackRetry = 250 * time.Millisecond
)

// attemptEventType says whether an event of type t is written by an
// attempt (not by admission or a cancel request).
func attemptEventType(t toolwirev1.CallEventType) bool {
	return t != toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED && t != toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED
}

// startedEvent records that an attempt started. Tools that are not safe to
// rerun store it durably before running (see attemptEvent): the error says
// it was not stored, and the attempt must not run. For safe tools it is
// published only if the attempt is still running after
// startedEventDelay, or just before its first progress event: a fast
// call's result already records its attempt, worker and start time, and
// skipping the event saves a stored message on the hot path.
//
// after and the sequence returned are durableStart's (0 for safe tools).
func (w *Worker) startedEvent(ctx context.Context, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, after uint64) (*delayed.Record, uint64, error) {
	if !safeToRerun(spec) {
		seq, err := w.durableStart(ctx, call, after)
		return nil, seq, err
	}
	// Only what the event names is kept (the attempt number changes
	// later), and the event is built only if it is published: most
	// attempts end before.
	id, name, attempt, caller, dispatcher := call.CallId, call.Tool, call.Attempt, call.Caller, call.Dispatcher
	return w.delayedEvents.Add(func() {
		w.publishEvent(&toolwirev1.ToolCall{CallId: id, Tool: name, Attempt: attempt, Caller: caller, Dispatcher: dispatcher},
			&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED})
	}), 0, nil
}

// notStarted hands back a call whose attempt could not record its durable
// STARTED event: nothing ran, and nothing may run without that record (a
// redelivery reads it to know that a tool that is not safe to rerun may
// have had effects). It first tries, briefly, to record that the attempt
// never ran, since a STARTED that was stored without its acknowledgement
// reaching the worker would otherwise make the redelivery answer
// UNKNOWN_OUTCOME. The delay grows with the delivery count: the events
// stream may be electing a leader.
func (d *delivery) notStarted(cause error) outcome {
	d.w.stats.notStarted.Add(1)
	te := envelope.NotRun("handed back without running: its STARTED event was not stored: " + cause.Error())
	d.log().Warn("STARTED event not stored; handing the call back without running it", "err", cause)
	_, _ = d.w.durableEvent(d.ctx, d.call, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING, Message: te.Message, Error: te},
		notStartedNoteTimeout)
	delay := notStartedDelay
	if md, err := d.msg.Metadata(); err == nil {
		for n := uint64(1); n < md.NumDelivered && delay < notStartedMaxDelay; n++ {
			delay *= 2
		}
	}
	return handBack(min(delay, notStartedMaxDelay), te)
}

// A call handed back because its STARTED event was not stored waits
// notStartedDelay before its next delivery, doubling with each delivery up
// to notStartedMaxDelay; the note that it never ran gets
// notStartedNoteTimeout.
const (
	notStartedDelay       = time.Second
	notStartedMaxDelay    = 8 * time.Second
	notStartedNoteTimeout = 2 * time.Second
)

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
	if err := w.bus.NC.Publish(w.eventSubject(call), data); err != nil {
		w.log.Debug("publish event failed", "call_id", call.CallId, "err", err)
	}
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

// sideEffectsOf says what earlier attempts may have changed, by the last
// attempt event.
func sideEffectsOf(prev *toolwirev1.CallEvent) toolwirev1.PartialSideEffects {
	if unknownOutcome(prev) {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
}
