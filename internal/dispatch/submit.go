package dispatch

import (
	"context"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Submitted is the outcome of admission.
type Submitted struct {
	CallID string
	// Rejected is set when admission refused the call; nothing was queued.
	Rejected *toolwirev1.ToolResponse
	// Unconfirmed is set when the calls stream had not acknowledged the
	// call by the admission horizon (a partition, an election): the call
	// may be stored and run, so it is accepted, and the dispatcher keeps
	// publishing it under its id (unconfirmed.go). GetResult and Watch
	// tell what became of it.
	Unconfirmed bool
	// Duplicate is set when the idempotency key named an earlier call.
	Duplicate bool
	// Finished is, for a Duplicate, the earlier call's terminal response
	// when it has one (its result, or its refusal); nil while it runs.
	Finished *toolwirev1.ToolResponse
	// Awaiting is set when the call is parked for an approver (an ask
	// decision; for a Duplicate, the earlier call still is): the
	// CONFIRMATION_REQUIRED answer with the approval id (and, for a
	// caller with the "confirm" scope, the token). Not terminal.
	Awaiting *toolwirev1.ToolResponse

	// admitted is the call as admission made it and published (or parked)
	// it under CallID; nil for a refusal and a Duplicate.
	admitted *toolwirev1.ToolCall
}

// Submit admits and publishes one call without waiting for its result. A
// duplicate of a call that has finished carries its terminal response.
func (d *Dispatcher) Submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest) (*Submitted, error) {
	s, _, err := d.submit(ctx, id, o, false)
	if err != nil || !s.Duplicate {
		return s, err
	}
	r, err := d.getResult(ctx, resultQuery{id: id, callID: s.CallID, known: true})
	if err != nil {
		// Still a duplicate: the caller fetches the result by id.
		d.log.WarnContext(ctx, "looking up the call of a repeated idempotency key failed", "call_id", s.CallID, "err", err)
		return s, nil
	}
	switch r.State {
	case toolwirev1.CallState_CALL_STATE_DONE:
		s.Finished = r.Response
	case toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		s.Awaiting = r.Response
	}
	return s, nil
}

// submit is admission observed (observe.go): the admission span and the
// admission metrics around the steps (admission.go).
func (d *Dispatcher) submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, withWaiter bool) (*Submitted, *waiter, error) {
	if o == nil {
		o = &toolwirev1.CallRequest{}
	}
	if err := identity.CheckTenant(id); err != nil {
		return nil, nil, err // not even a rejection can be recorded without mapping the tenant
	}
	start := time.Now()
	ctx, span := d.startAdmission(ctx, id, o)
	a := &admission{d: d, id: id, req: o, callID: ulid.Make().String(), now: start, waiting: withWaiter}
	s, w, err := a.admitAndPublish(ctx)
	d.endAdmission(span, s, err, start)
	if s != nil && !s.Duplicate && s.Rejected == nil && a.call != nil && a.call.GetCallId() == s.CallID {
		s.admitted = a.call
	}
	return s, w, err
}
