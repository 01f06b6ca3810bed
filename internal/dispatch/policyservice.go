package dispatch

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The policy RPCs (admin scope). Not wired yet.

var errNotYet = errors.New("not implemented yet")

// ApplyPolicy stores a policy document for the caller's tenant.
func (s *Service) ApplyPolicy(context.Context, *connect.Request[toolwirev1.ApplyPolicyRequest]) (*connect.Response[toolwirev1.ApplyPolicyResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// GetPolicy returns the policy document in force for the caller's tenant.
func (s *Service) GetPolicy(context.Context, *connect.Request[toolwirev1.GetPolicyRequest]) (*connect.Response[toolwirev1.GetPolicyResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// ListPolicyVersions lists the documents applied for the caller's tenant.
func (s *Service) ListPolicyVersions(context.Context, *connect.Request[toolwirev1.ListPolicyVersionsRequest]) (*connect.Response[toolwirev1.ListPolicyVersionsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}

// Explain decides a call as admission would and says why.
func (s *Service) Explain(context.Context, *connect.Request[toolwirev1.ExplainRequest]) (*connect.Response[toolwirev1.ExplainResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNotYet)
}
