package approvalflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ListApprovals lists the approvals of the caller's tenant (approve
// scope), newest first, filtered by state, tool glob, agent and session,
// at most req.Limit (0 = 100; more than 1,000 is 1,000); truncated says
// more matched. Arguments are shown redacted (the spec's secret fields).
// Errors: ErrNeedApproveScope, ErrBadApproval (a bad tool glob or a
// negative limit).
func (f *Flow) ListApprovals(ctx context.Context, id identity.Identity, req *toolwirev1.ListApprovalsRequest) ([]*toolwirev1.Approval, bool, error) {
	if err := checkApprover(id); err != nil {
		return nil, false, err
	}
	if req.GetLimit() < 0 {
		return nil, false, fmt.Errorf("%w: limit %d is negative", ErrBadApproval, req.GetLimit())
	}
	recs, truncated, err := f.store.List(ctx, id.Tenant, approvals.Filter{State: req.GetState(), Tool: req.GetTool(),
		Agent: req.GetAgent(), Session: req.GetSession(), Limit: min(int(req.GetLimit()), approvals.MaxListLimit)})
	if errors.Is(err, approvals.ErrBadFilter) {
		return nil, false, fmt.Errorf("%w: %w", ErrBadApproval, err)
	}
	if err != nil {
		return nil, false, err
	}
	out := make([]*toolwirev1.Approval, len(recs))
	for i, r := range recs {
		out[i] = r.Approval
	}
	return out, truncated, nil
}

// GetApproval returns approval approvalID of the caller's tenant (approve
// scope). Errors: ErrNeedApproveScope, ErrUnknownApproval.
func (f *Flow) GetApproval(ctx context.Context, id identity.Identity, approvalID string) (*toolwirev1.Approval, error) {
	if err := checkApprover(id); err != nil {
		return nil, err
	}
	rec, err := f.store.Get(ctx, id.Tenant, approvalID)
	if errors.Is(err, approvals.ErrNotFound) {
		return nil, fmt.Errorf("%w %q", ErrUnknownApproval, approvalID)
	}
	if err != nil {
		return nil, err
	}
	return rec.Approval, nil
}

// ListGrants lists the grants in force for the caller's tenant (approve
// scope), newest first, narrowed to one agent's or session's when given:
// the replica's index of them (approvals.GrantIndex). Grants past their
// expiry are left out. Errors: ErrNeedApproveScope.
func (f *Flow) ListGrants(_ context.Context, id identity.Identity, agent, session string) ([]*toolwirev1.Grant, error) {
	if err := checkApprover(id); err != nil {
		return nil, err
	}
	now := time.Now()
	var out []*toolwirev1.Grant
	for _, g := range f.grants.List(id.Tenant, agent, session) {
		if !g.Expires.IsZero() && !now.Before(g.Expires) {
			continue
		}
		out = append(out, grantView(g))
	}
	return out, nil
}

// RevokeGrant removes grant grantID of the caller's tenant (approve
// scope); it reports whether the grant existed. Calls it admitted and
// not yet started are refused by the worker's re-check. Errors:
// ErrNeedApproveScope.
func (f *Flow) RevokeGrant(ctx context.Context, id identity.Identity, grantID string) (bool, error) {
	if err := checkApprover(id); err != nil {
		return false, err
	}
	ok, err := f.store.RevokeGrant(ctx, id.Tenant, grantID)
	if err != nil {
		return false, err
	}
	f.grants.Remove(id.Tenant, grantID)
	return ok, nil
}

// grantView is the API's form of a stored grant; nil for nil.
func grantView(g *approvals.Grant) *toolwirev1.Grant {
	if g == nil {
		return nil
	}
	out := &toolwirev1.Grant{Id: g.ID, Layer: g.Layer.String(), Tenant: g.Tenant, Agent: g.Agent, Session: g.Session, Tool: g.Tool,
		Args: maps.Clone(g.Args), ApprovalId: g.ApprovalID, Approver: g.Approver, CreatedAt: timestamppb.New(g.CreatedAt)}
	if !g.Expires.IsZero() {
		out.ExpiresAt = timestamppb.New(g.Expires)
	}
	return out
}
