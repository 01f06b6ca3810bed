package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Cancel asks for a call to stop: it writes the call's tombstone (with a
// TTL) that workers check before starting and watch while running. A call
// parked for approval is ended at once: its approval is denied (by the
// cancelling agent) and it is answered CANCELLED. So is a call no attempt
// of which started (queued behind busy workers, say): settleCancelled
// answers it before Cancel returns.
// Cancelling twice, after completion or an unknown id changes nothing; a
// call the caller may not see (Config.AgentVisibility) is an unknown id.
// A call that is not unknown has its delegated calls cancelled too, and
// theirs (cancelDescendants), also when it has finished itself.
func (d *Dispatcher) Cancel(ctx context.Context, id identity.Identity, callID, reason string) (toolwirev1.CancelOutcome, error) {
	if err := identity.CheckTenant(id); err != nil {
		return 0, err
	}
	if _, err := ulid.ParseStrict(callID); err != nil {
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, nil
	}
	switch ok, err := d.reaches(ctx, id, callID); {
	case err != nil:
		return 0, err
	case !ok:
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, nil
	}
	out, err := d.cancelCall(ctx, id, callID, reason)
	if err == nil && out != toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL {
		d.cancelDescendants(ctx, id, callID, reason)
	}
	return out, err
}

// cancelCall cancels call callID of id's tenant, which id may reach (or
// which is a descendant of one it cancelled): Cancel's work after the
// visibility check.
func (d *Dispatcher) cancelCall(ctx context.Context, id identity.Identity, callID, reason string) (toolwirev1.CancelOutcome, error) {
	tool, err := d.callTool(ctx, id.Tenant, callID)
	if err != nil {
		return 0, err
	}
	resp, err := d.findResult(ctx, d.subj.ResultAnyDispatcher(id.Tenant, callID), tool)
	if err != nil {
		return 0, err
	}
	if resp != nil {
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, nil
	}
	ev, at, err := d.newestEventAt(ctx, eventQuery{tenant: id.Tenant, callID: callID, tool: tool})
	unrecorded := err == nil && ev == nil
	parked := false
	switch {
	case unrecorded:
		// No record yet: a stored call may be running with its admission
		// record not written yet. An id no dispatcher admitted (another
		// tenant's call too) answers as a made-up one does (admitted).
		if !d.admitted(ctx, id.Tenant, callID, tool) {
			return toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, nil
		}
	case err != nil:
		return 0, fmt.Errorf("dispatch: look up call: %w", err)
	case ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED:
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, nil
	default:
		parked = ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL
	}
	val, _ := json.Marshal(bus.Tombstone{By: id.Agent, Reason: reason})
	_, err = d.bus.Cancels.Create(ctx, bus.CancelKey(id.Tenant, callID), val, jetstream.KeyTTL(d.bus.Config.CancelTTL))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, nil // already requested
	}
	if err != nil {
		return 0, fmt.Errorf("dispatch: write tombstone: %w", err)
	}
	// A result reaches its waiting caller before the results stream has
	// stored it: a cancel sent right after Call returned a fast call (which
	// leaves no admission record) may have missed it above. Look again; a
	// result other than this cancellation means the call had finished (the
	// tombstone is harmless either way).
	if unrecorded {
		if resp, err := d.loadResult(ctx, d.subj.ResultAnyDispatcher(id.Tenant, callID), tool); err == nil && resp != nil &&
			resp.GetError().GetType() != toolwirev1.ErrorType_ERROR_TYPE_CANCELLED {
			return toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, nil
		}
	}
	recorded := d.eventOn(ctx, d.cancelSubject(ctx, eventQuery{tenant: id.Tenant, callID: callID, tool: tool}, at), callID, &toolwirev1.CallEvent{CallId: callID,
		Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED, Message: reason, Caller: &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent}})
	switch {
	case parked:
		// Waiting for an approver: nothing runs, so it ends here.
		d.approvals.CancelParked(ctx, id, callID, reason)
	case recorded && !unrecorded:
		// Queued, not started: answered now, not when a worker takes it.
		d.settleCancelled(ctx, id, cancelled{callID, tool, reason})
	}
	return toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, nil
}
