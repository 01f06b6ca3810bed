package worker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// errClaimLost says another delivery of the call recorded the start of
// this attempt (or a later one) before this delivery did.
var errClaimLost = errors.New("worker: another delivery of the call started it first")

// errStartUnconfirmed says an attempt's STARTED was stored but the events
// before it could not be read back before the worker's grace period or
// the call's deadline ended: the attempt must not run, and no note that
// it did not run may be written (another delivery may be running it, if
// this one went stale).
var errStartUnconfirmed = errors.New("worker: STARTED stored but not read back")

// errCancelledFirst says a cancel request of the call (a believed
// CANCEL_REQUESTED, which only a dispatcher writes) was stored on the
// call's events subject before this delivery's STARTED: the attempt must
// not run. The dispatcher that stored it may already have answered the
// call CANCELLED (internal/dispatch: a call cancelled before any attempt
// started is answered at cancel time); the error wraps the
// *CancelledError naming who cancelled and why.
var errCancelledFirst = errors.New("worker: the call was cancelled before its start was recorded")

// readBackTry bounds one read of a call's events after its STARTED was
// stored: the leader that stored it may be gone the moment after, and the
// others do not answer until one of them leads.
const readBackTry = 2 * time.Second

// startedEvent records that the attempt under way started. Tools that are
// not safe to rerun store it durably and claim the attempt before running
// (claimStart): an error says the attempt must not run. For safe tools it
// is published only if the attempt is still running after
// startedEventDelay, or just before its first progress event: a fast
// call's result already records its attempt, worker and start time, and
// skipping the event saves a stored message on the hot path.
func (d *delivery) startedEvent() (*delayed.Record, error) {
	if !safeToRerun(d.spec) {
		return nil, d.claimStart()
	}
	// Only what the event names is kept (the attempt number changes
	// later), and the event is built only if it is published: most
	// attempts end before.
	w, call := d.w, d.call
	id, name, attempt, caller, dispatcher := call.CallId, call.Tool, call.Attempt, call.Caller, call.Dispatcher
	return w.delayedEvents.Add(func() {
		w.publishEvent(&toolwirev1.ToolCall{CallId: id, Tool: name, Attempt: attempt, Caller: caller, Dispatcher: dispatcher},
			&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED})
	}), nil
}

// claimStart stores the STARTED event of an attempt of a tool that is not
// safe to rerun, then makes sure this delivery is the one that started
// it. Two deliveries of one call can both pass the look at the call's
// events (recheck): a worker that stalls past AckWait before its STARTED
// is stored (a long GC pause, SIGSTOP, a leader election, its own link
// cut while it held the call) and the redelivery that JetStream hands to
// another worker meanwhile. Both then store a STARTED for the same
// attempt; the stream orders them, and the one stored first wins. The
// loser returns errClaimLost and must neither run nor settle the call:
// its delivery is stale, or, if it is not, the next delivery reads the
// winner's STARTED.
//
// Both steps hold the call while the events stream does not answer
// (persist). The STARTED carries a message id of its own (the call, the
// attempt and a random part): a publish tried again after its
// acknowledgement was lost is the same message to the stream's duplicate
// window, and a copy stored beyond it is recognised as this delivery's
// own when the events are read back. The read starts after the
// delivery's own previous STARTED (d.startedSeq: an in-process retry): a
// competing STARTED of this attempt or a later one can only be stored
// after it. An error that is neither errClaimLost nor errStartUnconfirmed
// says the STARTED was not stored (persist's errStopping or errDeadline).
func (d *delivery) claimStart() error {
	w, call := d.w, d.call
	id := call.CallId + ".started." + strconv.Itoa(int(call.Attempt)) + "." + rand.Text()
	var seq uint64
	err := d.persist("storing the STARTED event", d.lookup(func(ctx context.Context) (err error) {
		seq, err = w.storeEvent(ctx, call, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED}, jetstream.WithMsgID(id))
		return err
	}))
	if err != nil {
		return err
	}
	after := d.startedSeq
	d.startedSeq = seq
	var lost string
	var cancelled *CancelledError
	err = d.persist("reading back the events before STARTED", func() error {
		ctx, cancel := context.WithTimeout(d.ctx, readBackTry)
		defer cancel()
		earlier, err := bus.MsgsBetweenFromLeader(ctx, w.bus.JS, w.bus.Events, w.eventSubject(call), after+1, seq)
		if err != nil {
			return err
		}
		lost, cancelled, err = w.competingStart(ctx, call, id, earlier)
		return err // a check that could not be made is tried again, as a read is
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", errStartUnconfirmed, err)
	case lost != "":
		return fmt.Errorf("%w (%s)", errClaimLost, lost)
	case cancelled != nil:
		return fmt.Errorf("%w: %w", errCancelledFirst, cancelled)
	}
	return nil
}

// competingStart describes the believed attempt event of this attempt
// or a later one among earlier, the events stored before this delivery's
// STARTED (message id own); "" when there is none. It also returns the
// cancel request stored among them, if any (a CANCEL_REQUESTED is
// believed only from a dispatcher): a cancel stored before the STARTED
// wins over it (errCancelledFirst). An error says an event could not be
// checked.
func (w *Worker) competingStart(ctx context.Context, call *toolwirev1.ToolCall, own string, earlier []*jetstream.RawStreamMsg) (string, *CancelledError, error) {
	var cancelled *CancelledError
	for _, m := range earlier {
		if m.Header.Get(jetstream.MsgIDHeader) == own {
			continue // this delivery's own, stored before its acknowledgement was lost
		}
		ev, ok, err := w.checkEvent(ctx, call, m)
		if err != nil {
			return "", nil, err
		}
		switch {
		case !ok:
		case attemptEventType(ev.Type) && ev.Attempt >= call.Attempt:
			return fmt.Sprintf("%s of attempt %d by %q at %d", ev.Type, ev.Attempt, ev.Worker, m.Sequence), nil, nil
		case ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED && cancelled == nil:
			cancelled = &CancelledError{bus.Tombstone{By: ev.GetCaller().GetAgent(), Reason: ev.GetMessage()}}
		}
	}
	return "", cancelled, nil
}

// notRun decides a call whose attempt may not start: its STARTED event
// (startedEvent) was not stored, is not this delivery's claim, or could
// not be confirmed as one.
func (d *delivery) notRun(err error) outcome {
	switch {
	case errors.Is(err, errClaimLost):
		// Another delivery runs it: leave this one unsettled.
		d.w.stats.claimsLost.Add(1)
		d.log().Warn("another delivery started this call first; leaving this delivery to it", "err", err)
		return leave()
	case errors.Is(err, errStartUnconfirmed) && errors.Is(err, errDeadline):
		// Another delivery may have run it, if this one went stale: the
		// stored answer says so, and it is the call's last word.
		d.w.stats.notStarted.Add(1)
		d.started = time.Now()
		d.finished = d.started
		return answer(d.errorResponse(&toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT,
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
			Message: fmt.Sprintf("schedule-to-close deadline passed before attempt %d's start could be confirmed (the call's events could not be read back); "+
				"this delivery did not run it, another delivery may have", d.call.Attempt)}))
	case errors.Is(err, errStartUnconfirmed):
		// Shutting down: a nak, even a stale one, would hand the call to a
		// third worker while the winner may run it, and a note that it did
		// not run may be false. Its next delivery, after AckWait, reads
		// this STARTED as an attempt of unknown outcome.
		d.w.stats.notStarted.Add(1)
		d.log().Warn("STARTED stored but not confirmed before shutdown; leaving the call unrun to its next delivery", "err", err)
		return leave()
	case errors.Is(err, errDeadline):
		d.w.stats.notStarted.Add(1)
		return d.expired()
	}
	// No durable STARTED, no execution.
	return d.notStarted(err)
}

// notStarted hands back, at shutdown, a call whose attempt could not
// record its durable STARTED event: nothing ran, and nothing may run
// without that record (a redelivery reads it to know that a tool that is
// not safe to rerun may have had effects). A STARTED stored without its
// acknowledgement reaching the worker would make the redelivery answer
// UNKNOWN_OUTCOME, so the note that the attempt never ran is stored first
// (noteNotRun).
func (d *delivery) notStarted(cause error) outcome {
	d.w.stats.notStarted.Add(1)
	te := envelope.NotRun(fmt.Sprintf("attempt %d handed back without running: its STARTED event was not stored: %v", d.call.Attempt, cause))
	d.log().Warn("STARTED event not stored; handing the call back without running it", "err", cause)
	d.noteNotRun(te)
	return handBack(0, te)
}

// claimedNotRun decides an attempt whose STARTED this delivery stored and
// claimed, reached by a cancel or the worker's shutdown before it ran: a
// caller's cancel is answered (nothing ran); at shutdown the call is
// handed back, after the note that the attempt never ran, so that its
// next delivery runs it instead of answering UNKNOWN_OUTCOME.
func (d *delivery) claimedNotRun(cause error) outcome {
	var ce *CancelledError
	if errors.As(cause, &ce) {
		return answer(d.cancelled(ce, " before the attempt started", toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE))
	}
	d.w.stats.notStarted.Add(1)
	te := envelope.NotRun(fmt.Sprintf("attempt %d handed back without running: %v", d.call.Attempt, cause))
	d.noteNotRun(te)
	return handBack(0, te)
}

// noteNotRun stores a RETRYING event with side effects NONE for the
// attempt under way, which this delivery leaves unrun after its STARTED
// was (or may have been) stored: the next delivery then runs the next
// attempt. It is tried with backoff for notRunNoteTimeout, the worker
// being past its grace period when it is needed; unstored, the next
// delivery answers UNKNOWN_OUTCOME (the safe side, never a second run).
func (d *delivery) noteNotRun(te *toolwirev1.ToolError) {
	ev := &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING, Message: te.Message, Error: te}
	until := time.Now().Add(notRunNoteTimeout)
	for delay := holdRetryMin; ; delay = min(2*delay, holdRetryMax) {
		ctx, cancel := context.WithDeadline(d.ctx, until)
		_, err := d.w.storeEvent(ctx, d.call, ev)
		cancel()
		if err == nil {
			return
		}
		if time.Until(until) < delay {
			d.log().Warn("note that the attempt did not run not stored; if its STARTED was, its next delivery answers UNKNOWN_OUTCOME", "err", err)
			return
		}
		time.Sleep(delay) // bounded by notRunNoteTimeout: the worker is stopping
	}
}

// notRunNoteTimeout bounds noteNotRun.
const notRunNoteTimeout = 2 * time.Second
