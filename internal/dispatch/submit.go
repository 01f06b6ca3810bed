package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limitgate"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Submitted is the outcome of admission.
type Submitted struct {
	CallID string
	// Rejected is set when admission refused the call; nothing was queued.
	Rejected *toolwirev1.ToolResponse
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
}

// Submit admits and publishes one call without waiting for its result. A
// duplicate of a call that has finished carries its terminal response.
func (d *Dispatcher) Submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest) (*Submitted, error) {
	s, _, err := d.submit(ctx, id, o, false)
	if err != nil || !s.Duplicate {
		return s, err
	}
	r, err := d.getResult(ctx, id, s.CallID, 0, true)
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

// submit is admitAndPublish observed (observe.go): the admission span and
// the admission metrics.
func (d *Dispatcher) submit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, withWaiter bool) (*Submitted, *waiter, error) {
	if o == nil {
		o = &toolwirev1.CallRequest{}
	}
	if err := identity.CheckTenant(id); err != nil {
		return nil, nil, err // not even a rejection can be recorded without mapping the tenant
	}
	start := time.Now()
	ctx, span := d.startAdmission(ctx, id, o)
	s, w, err := d.admitAndPublish(ctx, id, o, withWaiter, start)
	d.endAdmission(span, s, err, start)
	return s, w, err
}

// admitAndPublish admits the call (admission.go), then, unless a waiter
// slot, its idempotency key or the load refuses it, publishes it
// (publish.go). A refusal is answered in Submitted.Rejected. A call the
// policy asks about is parked instead (approve.go), and a call an
// approval token covers is the parked call it approves: it takes that
// call's id and is published as it.
func (d *Dispatcher) admitAndPublish(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, withWaiter bool, now time.Time) (*Submitted, *waiter, error) {
	callID := ulid.Make().String()
	call, te, pd, ask := d.admit(ctx, id, o, callID, now)
	if te != nil {
		d.redactRefusal(ctx, o, te)
		return d.refuseDecided(ctx, id, o, callID, te, pd, now), nil, nil
	}
	if ask != nil && ask.token != nil {
		ask.minted, callID = callID, ask.token.ID
		call.CallId = callID
	}
	parked := ask != nil && ask.token == nil
	var w *waiter
	// A parked call is waited on only when the caller asked to wait for
	// the approval; otherwise it is answered at once.
	if withWaiter && (!parked || o.WaitForApproval) {
		var err error
		w, err = d.wait(id.Tenant, callID)
		if errors.Is(err, errOverloaded) {
			te := envelope.Overloaded(fmt.Sprintf("this dispatcher already has %d callers waiting", d.cfg.MaxWaiting), time.Second)
			// Recorded like every refusal: any replica answers the id.
			return d.refuse(ctx, id, o, callID, te, now), nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if o.IdempotencyKey != "" {
		if s, done, err := d.claimKey(ctx, id, call, w); done || err != nil {
			return s, nil, err
		}
	}
	switch {
	case parked:
		// An ask is counted against its limits when it is parked (its
		// rates and budgets; no slot while it waits): a refusal parks
		// nothing.
		t, refused := d.limitCall(ctx, limitStep{id: id, o: o, w: w, limit: limitgate.Call{Call: call, Allowed: pd, Now: now}})
		if refused != nil {
			return refused, nil, nil
		}
		s, w, err := d.park(ctx, o, &outgoing{id: id, w: w, callID: callID, now: now, call: call}, ask)
		if s != nil && s.Rejected != nil {
			d.limitGate.GiveBack(context.WithoutCancel(ctx), t)
		}
		return s, w, err
	case ask != nil:
		// The parked call a token approves: counted when it was parked.
		return d.redeem(ctx, o, &outgoing{id: id, w: w, callID: callID, now: now, call: call}, ask)
	}
	// Overload (load.go): after the key, so that a repeat of an accepted
	// call still answers that call.
	subject := d.subj.Call(call.Executor, id.Tenant, call.Provider, call.Tool)
	pool, te, cause, target := d.load.check(ctx, subject, o.IdempotencyKey != "", scheduleToStart(call, now))
	if te != nil {
		if w != nil {
			w.cancel()
		}
		if o.IdempotencyKey != "" {
			// A retry with the same key may have found the key claimed and
			// now waits on this call id: record the refusal before the key
			// is released, so that it gets this answer (overload refusals
			// of calls without a key are not stored: load.go).
			d.recordRejection(ctx, id, o, callID, te, nil)
		}
		d.releaseKey(id, o)
		return d.refuseOverloaded(o, callID, te, cause, target, now), nil, nil
	}
	defer pool.settle() // the publish below is answered, or nothing is published
	// Limits (limits.go): last, so that a refusal above spends nothing.
	t, refused := d.limitCall(ctx, limitStep{id: id, o: o, w: w, limit: limitgate.Call{Call: call, Allowed: pd, Now: now, Slots: true}})
	if refused != nil {
		return refused, nil, nil
	}
	// Held before the publish: a fast call's result can reach this
	// replica's results consumer (which releases the slots) before the
	// publish returns.
	d.limitGate.Hold(t)
	s, w, err := d.publish(ctx, o, &outgoing{id: id, w: w, callID: callID, now: now, call: call, subject: subject})
	if s != nil && s.Rejected != nil {
		d.limitGate.Unhold(callID)
		d.limitGate.GiveBack(context.WithoutCancel(ctx), t)
	}
	return s, w, err
}

// refuse records the refusal of a call as a REJECTED event (so that any
// replica answers its id with it) and answers it.
func (d *Dispatcher) refuse(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, callID string, te *toolwirev1.ToolError, now time.Time) *Submitted {
	return d.refuseDecided(ctx, id, o, callID, te, nil, now)
}

// refuseDecided is refuse with the policy decision that refused, if one
// did, in the record.
func (d *Dispatcher) refuseDecided(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, callID string, te *toolwirev1.ToolError, pd *toolwirev1.PolicyDecision, now time.Time) *Submitted {
	d.recordRejection(ctx, id, o, callID, te, pd)
	return &Submitted{CallID: callID, Rejected: envelope.Rejection(callID, o.Tool, te, now)}
}
