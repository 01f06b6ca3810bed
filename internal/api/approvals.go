package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval RPCs (approve scope): each takes the caller's identity,
// calls the replica's approval flow (internal/approvalflow) and maps its
// errors.

// approvalErr maps an approval method's error to a Connect error.
func approvalErr(err error) error {
	switch {
	case errors.Is(err, approvalflow.ErrNeedApproveScope):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, approvalflow.ErrUnknownApproval):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, approvalflow.ErrApprovalDecided), errors.Is(err, approvalflow.ErrPolicyDenies), errors.Is(err, approvalflow.ErrSessionInactive):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, approvalflow.ErrBadApproval), errors.Is(err, identity.ErrBadTenant):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, dispatch.ErrStopped):
		return toConnectErr(err)
	}
	// The approvals bucket did not answer or refused a write.
	return connect.NewError(connect.CodeUnavailable, err)
}

// ListApprovals lists the approvals of the caller's tenant.
func (s *Service) ListApprovals(ctx context.Context, req *connect.Request[toolwirev1.ListApprovalsRequest]) (*connect.Response[toolwirev1.ListApprovalsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	list, truncated, err := s.approvals.ListApprovals(ctx, id, req.Msg)
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.ListApprovalsResponse{Approvals: list, Truncated: truncated}), nil
}

// GetApproval returns one approval.
func (s *Service) GetApproval(ctx context.Context, req *connect.Request[toolwirev1.GetApprovalRequest]) (*connect.Response[toolwirev1.GetApprovalResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.approvals.GetApproval(ctx, id, req.Msg.GetId())
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.GetApprovalResponse{Approval: a}), nil
}

// Approve approves a parked call.
func (s *Service) Approve(ctx context.Context, req *connect.Request[toolwirev1.ApproveRequest]) (*connect.Response[toolwirev1.ApproveResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	a, g, err := s.approvals.Approve(ctx, id, req.Msg)
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.ApproveResponse{Approval: a, Grant: g}), nil
}

// Deny denies a parked call.
func (s *Service) Deny(ctx context.Context, req *connect.Request[toolwirev1.DenyRequest]) (*connect.Response[toolwirev1.DenyResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.approvals.Deny(ctx, id, req.Msg.GetId(), req.Msg.GetReason())
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.DenyResponse{Approval: a}), nil
}

// ListGrants lists the grants of the caller's tenant.
func (s *Service) ListGrants(ctx context.Context, req *connect.Request[toolwirev1.ListGrantsRequest]) (*connect.Response[toolwirev1.ListGrantsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	gs, err := s.approvals.ListGrants(ctx, id, req.Msg.GetAgent(), req.Msg.GetSession())
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.ListGrantsResponse{Grants: gs}), nil
}

// RevokeGrant removes a grant.
func (s *Service) RevokeGrant(ctx context.Context, req *connect.Request[toolwirev1.RevokeGrantRequest]) (*connect.Response[toolwirev1.RevokeGrantResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := s.approvals.RevokeGrant(ctx, id, req.Msg.GetId())
	if err != nil {
		return nil, approvalErr(err)
	}
	return connect.NewResponse(&toolwirev1.RevokeGrantResponse{Revoked: ok}), nil
}
