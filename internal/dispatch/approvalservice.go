package dispatch

import (
	"context"

	"connectrpc.com/connect"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval RPCs (approve scope). Not wired yet.

// ListApprovals lists the approvals of the caller's tenant.
func (s *Service) ListApprovals(context.Context, *connect.Request[toolwirev1.ListApprovalsRequest]) (*connect.Response[toolwirev1.ListApprovalsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// GetApproval returns one approval.
func (s *Service) GetApproval(context.Context, *connect.Request[toolwirev1.GetApprovalRequest]) (*connect.Response[toolwirev1.GetApprovalResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// Approve approves a parked call.
func (s *Service) Approve(context.Context, *connect.Request[toolwirev1.ApproveRequest]) (*connect.Response[toolwirev1.ApproveResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// Deny denies a parked call.
func (s *Service) Deny(context.Context, *connect.Request[toolwirev1.DenyRequest]) (*connect.Response[toolwirev1.DenyResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// ListGrants lists the grants of the caller's tenant.
func (s *Service) ListGrants(context.Context, *connect.Request[toolwirev1.ListGrantsRequest]) (*connect.Response[toolwirev1.ListGrantsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// RevokeGrant removes a grant.
func (s *Service) RevokeGrant(context.Context, *connect.Request[toolwirev1.RevokeGrantRequest]) (*connect.Response[toolwirev1.RevokeGrantResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}
