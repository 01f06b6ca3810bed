package dispatch

import (
	"context"
	"slices"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MaxDelegationChildrenShown is the most children GetDelegation describes
// (the rest it counts in more_children).
const MaxDelegationChildrenShown = 20

// GetDelegation returns call callID's place in its delegation chain
// (docs/delegation.md, "Seeing a chain"): its ancestors, parent first, up
// to the root (at most Config.MaxDelegationDepth of them), and its direct
// children, oldest first (at most MaxDelegationChildrenShown, the rest
// counted), each with its tool and state as GetResult answers it. It reads
// the chain's records in the limits bucket, whose keys carry the caller's
// tenant, so another tenant's call is never reached; a call the caller
// may not see (Config.AgentVisibility) is left out: an ancestor ends the
// list there, a child is skipped. The call itself the caller may not see
// is UNKNOWN, as in GetResult. The records live the cancels' TTL: past it
// a call shows no chain. It lists the children's keys (an ordered
// consumer on the limits bucket per request): once per request, where
// admission counts without listing (countChild).
func (d *Dispatcher) GetDelegation(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.GetDelegationResponse, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	self, err := d.describeCall(ctx, id, callID)
	if err != nil {
		return nil, err
	}
	out := &toolwirev1.GetDelegationResponse{CallId: callID, State: self.GetState()}
	if self.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN {
		return out, nil
	}
	if out.Ancestors, err = d.ancestors(ctx, id, callID); err != nil {
		return nil, err
	}
	if out.Children, out.MoreChildren, err = d.childCalls(ctx, id, callID); err != nil {
		return nil, err
	}
	return out, nil
}

// ancestors returns the calls above callID that id may see, parent first.
func (d *Dispatcher) ancestors(ctx context.Context, id identity.Identity, callID string) ([]*toolwirev1.DelegatedCall, error) {
	var out []*toolwirev1.DelegatedCall
	cur := callID
	for len(out) < d.cfg.MaxDelegationDepth {
		l, err := d.linkOf(ctx, id.Tenant, cur)
		if err != nil {
			return nil, err
		}
		if l.Parent == "" || l.Parent == cur {
			break
		}
		dc, err := d.describeCall(ctx, id, l.Parent)
		if err != nil {
			return nil, err
		}
		if dc.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN {
			break
		}
		out = append(out, dc)
		cur = l.Parent
	}
	return out, nil
}

// childCalls returns the children of callID that id may see, oldest
// first, at most MaxDelegationChildrenShown, and how many more there are.
func (d *Dispatcher) childCalls(ctx context.Context, id identity.Identity, callID string) ([]*toolwirev1.DelegatedCall, int32, error) {
	kids, err := d.children(ctx, id.Tenant, callID, d.cfg.MaxDelegationFanOut)
	if err != nil {
		return nil, 0, err
	}
	kids = slices.DeleteFunc(kids, func(k string) bool { _, err := ulid.ParseStrict(k); return err != nil })
	slices.Sort(kids) // ULIDs: oldest first
	var out []*toolwirev1.DelegatedCall
	var more int32
	for _, k := range kids {
		if len(out) >= MaxDelegationChildrenShown {
			if ok, err := d.reaches(ctx, id, k); err == nil && ok {
				more++
			}
			continue
		}
		dc, err := d.describeCall(ctx, id, k)
		if err != nil {
			return nil, 0, err
		}
		if dc.GetState() != toolwirev1.CallState_CALL_STATE_UNKNOWN {
			out = append(out, dc)
		}
	}
	return out, more, nil
}

// describeCall is call callID of id's tenant as GetDelegation shows it:
// UNKNOWN when id may not see it or no record of it is found.
func (d *Dispatcher) describeCall(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.DelegatedCall, error) {
	dc := &toolwirev1.DelegatedCall{CallId: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}
	if ok, err := d.reaches(ctx, id, callID); err != nil || !ok {
		return dc, err
	}
	r, err := d.getResult(ctx, resultQuery{id: id, callID: callID})
	if err != nil {
		return nil, err
	}
	dc.State = r.GetState()
	resp := r.GetResponse()
	if dc.Tool, err = d.callTool(ctx, id.Tenant, callID); err != nil { // looked up by getResult: remembered
		return nil, err
	}
	if dc.State == toolwirev1.CallState_CALL_STATE_DONE {
		dc.Ok = resp.GetError() == nil
		dc.ErrorType = resp.GetError().GetType()
	}
	return dc, nil
}
