package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// look looks at a call that is due: nothing to do when it has a result
// or was refused at admission (its REJECTED record is its answer);
// otherwise it is answered (doc.go, "Overdue sweeper", for what the answer
// says). Every read is from the streams' leaders. An error means it could
// not tell or not answer now.
func (s *OverdueSweeper) look(ctx context.Context, c *tracked) error {
	b := s.cfg.Bus
	// A result on any dispatcher's subject counts: it is the call's
	// whoever routed it. (Before the approving replica stored an approved
	// call's ACCEPTED record on the call's own dispatcher's subject, it
	// named the approver, where the call's result never was.)
	result := b.Subjects.Result(c.tenant, c.dispatcher, c.callID)
	if ok, err := answered(ctx, b, b.Subjects.ResultAnyDispatcher(c.tenant, c.callID), c.tool); err != nil {
		return fmt.Errorf("look up the result: %w", err)
	} else if ok {
		return nil
	}
	if !c.resultFirst.IsZero() {
		// Looked at early, for the result read before the record: it is
		// not believed, so the call is followed until it falls due.
		c.due, c.resultFirst = c.resultFirst, time.Time{}
		s.track.again(c)
		return nil
	}
	msgs, err := bus.AllMsgsFromLeader(ctx, b.JS, b.Events, b.Subjects.EventsAnyDispatcher(c.tenant, c.callID))
	if err != nil {
		return fmt.Errorf("read the call's events: %w", err)
	}
	h := s.historyOf(ctx, c, msgs)
	if h.rejected {
		return nil
	}
	te, err := s.verdict(ctx, c, h)
	if err != nil {
		return err
	}
	if err := s.deadLetter(ctx, c, te, h.last.GetAttempt()); err != nil {
		return err
	}
	call := &toolwirev1.ToolCall{CallId: c.callID, Tool: c.tool, SpecVersion: c.spec, Dispatcher: c.dispatcher,
		Caller: &toolwirev1.Caller{Tenant: c.tenant, Session: c.session}, AcceptedAt: timestamppb.New(c.accepted)}
	if err := answer(ctx, b, result, envelope.DeadLettered(call, te, h.last.GetAttempt(), time.Now())); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	s.answered.Add(1)
	s.cfg.Logger.Warn("answered an accepted call whose result is overdue", "call_id", c.callID, "tenant", c.tenant,
		"tool", c.tool, "error_type", te.Type, "side_effects", te.PartialSideEffects)
	return nil
}

// history is what a call's events say about it.
type history struct {
	last     *toolwirev1.CallEvent // the newest attempt event; nil = none
	rejected bool                  // refused at admission
}

// historyOf reads the events of c, oldest first. Only believed events
// count (internal/believed: an attempt's signed by a key of its tool's
// pool, a rejection by a dispatcher); one whose check failed for a lookup
// counts as a started attempt (the worst case).
func (s *OverdueSweeper) historyOf(ctx context.Context, c *tracked, msgs []*jetstream.RawStreamMsg) history {
	var h history
	for _, m := range msgs {
		ev, _, err := believed.CheckEvent(ctx, s.cfg.Bus.Keys, c.callID, c.tool, m.Header, m.Data)
		if signing.AsError(err) != nil {
			continue
		}
		if err != nil {
			h.last = &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED}
			continue
		}
		switch ev.Type {
		case toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS,
			toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING:
			h.last = ev
		case toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED:
			h.rejected = true
		}
	}
	return h
}

// mayHaveRun reports whether an attempt event says an attempt may have
// had effects: it started (or reported progress) with no end recorded, or
// it failed with effects that are not known to be none.
func mayHaveRun(last *toolwirev1.CallEvent) bool {
	if last == nil {
		return false
	}
	if last.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING {
		return last.GetError().GetPartialSideEffects() != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return true
}

// verdict is the error an overdue call is answered with; it must be true
// whatever happened to the call's messages.
//
//   - An attempt may have run (mayHaveRun): UNKNOWN_OUTCOME, effects
//     unknown, saying which attempt started where and when.
//   - The call has a deadline and its tool (the spec version admitted,
//     read from the registry) is neither read-only nor idempotent: each of
//     its attempts stores its STARTED event before it runs, and no worker
//     starts a call past its deadline, so what the events show is all that
//     ever runs. No attempt: EXPIRED, never executed. The last attempt
//     failed without effects: TIMEOUT, effects NONE.
//   - Otherwise nothing can be shown: a safe-to-rerun tool's short
//     attempt records no STARTED, and a call without a deadline may still
//     be queued. UNKNOWN_OUTCOME, effects unknown (NONE for a read-only
//     tool).
func (s *OverdueSweeper) verdict(ctx context.Context, c *tracked, h history) (*toolwirev1.ToolError, error) {
	const suggestion = "check the tool's target for the effect before calling again"
	if mayHaveRun(h.last) {
		return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME,
			Message:            fmt.Sprintf("%s; attempt %d %s: it may have run, and a result it still produces is not stored", s.overdue(c), h.last.Attempt, startedOn(h.last)),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, Suggestion: suggestion}, nil
	}
	spec, err := s.spec(ctx, c)
	if err != nil {
		return nil, err
	}
	a := spec.GetAnnotations()
	if !c.deadline.IsZero() && spec != nil && !a.GetReadOnly() && !a.GetIdempotent() {
		if h.last == nil {
			return envelope.Expired(s.overdue(c) + "; no attempt started (its tool records every attempt before it runs, and no worker starts a call past its deadline): never executed"), nil
		}
		return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT,
			Message: fmt.Sprintf("%s; attempt %d ended without effects (%s) and no attempt ran after it",
				s.overdue(c), h.last.Attempt, h.last.GetError().GetMessage()),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}, nil
	}
	why := "no attempt was recorded, but an attempt of a read-only or idempotent tool (or of a tool whose spec is unknown) records none when it is short"
	if c.deadline.IsZero() {
		why = "the call has no schedule-to-close deadline: it may still be queued, and a worker may still run it"
	}
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME,
		Message:            fmt.Sprintf("%s; %s: it may have run, and a result it produces later is not stored", s.overdue(c), why),
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, Suggestion: suggestion}
	if a.GetReadOnly() {
		te.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return te, nil
}

// overdue says what is overdue about c.
func (s *OverdueSweeper) overdue(c *tracked) string {
	if c.deadline.IsZero() {
		return fmt.Sprintf("no result %s after the call was accepted (%s)", s.cfg.NoDeadline, c.accepted.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("no result by the call's schedule-to-close deadline (%s, looked %s later)",
		c.deadline.UTC().Format(time.RFC3339Nano), time.Since(c.deadline).Round(time.Second))
}

// startedOn says where and when an attempt event was recorded.
func startedOn(ev *toolwirev1.CallEvent) string {
	what := "started"
	switch ev.Type {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS:
		what = "reported progress"
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING:
		what = "failed with effects unknown"
	}
	if ev.Worker != "" {
		what += " on worker " + ev.Worker
	}
	if ev.Time != nil {
		what += " at " + ev.Time.AsTime().UTC().Format(time.RFC3339Nano)
	}
	return what + " and no result was stored"
}

// spec returns the spec version c was admitted with, read from the
// registry; nil when the record named none or the registry no longer
// holds it.
func (s *OverdueSweeper) spec(ctx context.Context, c *tracked) (*toolwirev1.ToolSpec, error) {
	if c.spec == "" || c.tool == "" {
		return nil, nil
	}
	e, err := s.cfg.Bus.Registry.Get(ctx, registry.VersionKey(c.tool, c.spec))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read spec %s@%s: %w", c.tool, c.spec, err)
	}
	spec := &toolwirev1.ToolSpec{}
	if proto.Unmarshal(e.Value(), spec) != nil {
		return nil, nil
	}
	return spec, nil
}

// deadLetter records the overdue call in the DLQ (message id
// overdue-<call_id>): the admission record, raw (the sweeper never holds
// the call itself, which may never have been stored, so `toolctl dlq
// retry` does not retry it), under its tenant and tool.
func (s *OverdueSweeper) deadLetter(ctx context.Context, c *tracked, te *toolwirev1.ToolError, attempts int32) error {
	b := s.cfg.Bus
	rec, err := proto.Marshal(&toolwirev1.CallEvent{CallId: c.callID, Tool: c.tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED,
		Time: timestamppb.New(c.accepted), Caller: &toolwirev1.Caller{Tenant: c.tenant, Session: c.session},
		SpecVersion: c.spec, Deadline: deadlineOf(c)})
	if err != nil {
		return err
	}
	dl := &toolwirev1.DeadLetter{Subject: b.Subjects.Event(c.tenant, c.dispatcher, c.callID), Raw: rec,
		Reason: "accepted call overdue: no result", LastError: te, Attempts: attempts, Time: timestamppb.Now(),
		Worker: "overdue:" + s.cfg.Name}
	subject := b.Subjects.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, c.tenant, "_unknown", c.tool)
	return publishDeadLetter(ctx, b, dl, letterAddress{subject: subject, msgID: "overdue-" + c.callID})
}

func deadlineOf(c *tracked) *timestamppb.Timestamp {
	if c.deadline.IsZero() {
		return nil
	}
	return timestamppb.New(c.deadline)
}
