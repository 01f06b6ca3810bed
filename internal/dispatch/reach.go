package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/identity"
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
// or, for a call refused at admission (never stored), its REJECTED event,
// which a dispatcher signs — never a result, which a worker credential
// can write. "" when none is found.
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
	ev, err := d.lastEvent(ctx, tenant, callID, "")
	if err != nil {
		return "", fmt.Errorf("dispatch: look up call %s: %w", callID, err)
	}
	return ev.GetCaller().GetAgent(), nil
}
