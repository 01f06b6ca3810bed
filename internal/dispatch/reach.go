package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// reaches reports whether id may see call callID of its tenant under
// Config.AgentVisibility (identity.Identity.MaySeeCall): GetResult (and
// GetOutput and ApplyIntents through it), Watch and Cancel answer a call
// outside as a made-up id. A key that sees every agent's calls (the
// default, VisibilityTenant) needs no look-up; otherwise the call's agent
// is looked up (callAgent), and a call whose agent is not found is
// outside.
func (d *Dispatcher) reaches(ctx context.Context, id identity.Identity, callID string) (bool, error) {
	if id.SeesEveryAgent(d.cfg.AgentVisibility) {
		return true, nil
	}
	if _, err := ulid.ParseStrict(callID); err != nil {
		return false, nil // no call has it; never a subject token
	}
	agent, err := d.callAgent(ctx, id.Tenant, callID)
	if err != nil {
		return false, err
	}
	return id.MaySeeCall(id.Tenant, agent, d.cfg.AgentVisibility), nil
}

// callAgent returns the agent that made call callID of tenant, as a
// dispatcher recorded it — this replica's memory (calls it published,
// calls looked up), the stored call or its approval record (storedCall),
// or, for a call not stored (refused at admission, or past the calls
// stream's retention), its events (eventAgent) — never a result, which a
// worker credential can write. "" when none is found.
func (d *Dispatcher) callAgent(ctx context.Context, tenant, callID string) (string, error) {
	key := toolKey(tenant, callID)
	if a, _ := d.owners.get(key); a != "" {
		return a, nil
	}
	call, err := d.storedCall(ctx, tenant, "", callID)
	switch {
	case err == nil:
		d.owners.put(key, call.GetCaller().GetAgent())
		return call.GetCaller().GetAgent(), nil
	case !errors.Is(err, ErrCallNotStored):
		return "", fmt.Errorf("dispatch: look up call %s: %w", callID, err)
	}
	return d.eventAgent(ctx, tenant, callID)
}

// eventAgent is the agent the newest of call callID's events that name
// its caller names: the events a dispatcher records with the call's own
// caller (callerEvent) — its admission (ACCEPTED, REJECTED, AWAITING_APPROVAL)
// and its approval's decision — never a CANCEL_REQUESTED, which names
// the canceller, nor an attempt's event, which a worker may sign. ""
// when there is none.
func (d *Dispatcher) eventAgent(ctx context.Context, tenant, callID string) (string, error) {
	ev, err := d.newestEvent(ctx, eventQuery{tenant: tenant, callID: callID, keep: callerEvent})
	if err != nil {
		return "", fmt.Errorf("dispatch: look up call %s: %w", callID, err)
	}
	return ev.GetCaller().GetAgent(), nil
}

// callerEvent reports whether events of type t name the call's caller.
func callerEvent(t toolwirev1.CallEventType) bool {
	switch t {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_DENIED, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_EXPIRED:
		return true
	}
	return false
}
