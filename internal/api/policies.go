package api

import (
	"cmp"
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policyops"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The policy RPCs: apply, show and list a tenant's policy documents, and
// explain a decision (internal/policyops does the work). Every one needs
// the admin scope; the tenant is the caller's, from its credentials,
// never from the request.

// policyError answers a policyops error: a refused request, document or
// comment is invalid_argument (the message names the lines), an unknown
// tool or version not_found, a store failure unavailable.
func policyError(err error) error {
	switch {
	case errors.Is(err, policyops.ErrNotAdmin):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, policyops.ErrNoPolicySource), errors.Is(err, policyops.ErrStoredPolicy):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, policyops.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, policyops.ErrBadRequest), errors.Is(err, policy.ErrInvalid), errors.Is(err, policy.ErrTestsFailed),
		errors.Is(err, policystore.ErrBadComment), errors.Is(err, policystore.ErrBadScope):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, policystore.ErrUnknownVersion), errors.Is(err, policystore.ErrNoPolicy), errors.Is(err, registry.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, policystore.ErrQuota):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return toConnectErr(err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// ApplyPolicy checks a policy document and, unless it is a dry run,
// stores it and puts it in force for the caller's tenant
// (policyops.Ops.Apply).
func (s *Service) ApplyPolicy(ctx context.Context, req *connect.Request[toolwirev1.ApplyPolicyRequest]) (*connect.Response[toolwirev1.ApplyPolicyResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	res, err := s.policies.Apply(ctx, id, policyops.ApplyRequest{Document: []byte(m.Document), Comment: m.Comment, DryRun: m.DryRun})
	if err != nil {
		return nil, policyError(err)
	}
	return connect.NewResponse(&toolwirev1.ApplyPolicyResponse{Version: versionProto(res.Version), Changed: res.Changed,
		TestsPassed: int32(res.TestsPassed), InForce: res.InForce,
		ReplicasInForce: res.Fleet.InForce, ReplicasNotInForce: res.Fleet.NotInForce}), nil
}

// RemovePolicy takes the caller's tenant's own document out of force
// (policyops.Ops.Remove).
func (s *Service) RemovePolicy(ctx context.Context, req *connect.Request[toolwirev1.RemovePolicyRequest]) (*connect.Response[toolwirev1.RemovePolicyResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.policies.Remove(ctx, id)
	if err != nil {
		return nil, policyError(err)
	}
	out := &toolwirev1.RemovePolicyResponse{Removed: res.Removed, ReplicasInForce: res.Fleet.InForce, ReplicasNotInForce: res.Fleet.NotInForce}
	if res.InForce != nil {
		out.InForce = versionProto(*res.InForce)
	}
	return connect.NewResponse(out), nil
}

// GetPolicy returns the document in force for the caller's tenant, or one
// version (policyops.Ops.Document); an empty response when there is none.
func (s *Service) GetPolicy(ctx context.Context, req *connect.Request[toolwirev1.GetPolicyRequest]) (*connect.Response[toolwirev1.GetPolicyResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := s.policies.Document(ctx, id, req.Msg.Version)
	switch {
	case err != nil:
		return nil, policyError(err)
	case doc == nil:
		return connect.NewResponse(&toolwirev1.GetPolicyResponse{}), nil
	}
	return connect.NewResponse(&toolwirev1.GetPolicyResponse{Version: versionProto(doc.Version), Document: string(doc.Source)}), nil
}

// ListPolicyVersions lists the applies of the caller's tenant's document,
// newest first (policyops.Ops.Versions).
func (s *Service) ListPolicyVersions(ctx context.Context, req *connect.Request[toolwirev1.ListPolicyVersionsRequest]) (*connect.Response[toolwirev1.ListPolicyVersionsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	hist, err := s.policies.Versions(ctx, id, int(req.Msg.Limit))
	if err != nil {
		return nil, policyError(err)
	}
	out := &toolwirev1.ListPolicyVersionsResponse{Versions: make([]*toolwirev1.PolicyVersion, len(hist))}
	for i, v := range hist {
		out.Versions[i] = versionProto(v)
	}
	return connect.NewResponse(out), nil
}

func versionProto(v policystore.Version) *toolwirev1.PolicyVersion {
	pv := &toolwirev1.PolicyVersion{Version: v.Version, Tenant: v.Scope.Tenant(), AppliedBy: v.AppliedBy, Comment: v.Comment,
		Rules: int32(v.Rules), Tests: int32(v.Tests)}
	if !v.AppliedAt.IsZero() {
		pv.AppliedAt = timestamppb.New(v.AppliedAt)
	}
	return pv
}

// Explain decides a call of the caller's tenant as admission would and
// says why (policyops.Ops.Explain).
func (s *Service) Explain(ctx context.Context, req *connect.Request[toolwirev1.ExplainRequest]) (*connect.Response[toolwirev1.ExplainResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	x, err := s.policies.Explain(ctx, id, policyops.ExplainRequest{Tool: m.Tool, SpecVersion: m.SpecVersion,
		Arguments: []byte(m.ArgumentsJson), Agent: m.Agent, Session: m.Session, User: m.User, Run: m.Run, Scopes: m.Scopes,
		PolicyVersion: m.PolicyVersion, ApprovalID: m.ApprovalId, Mode: m.Mode, Model: m.Model})
	if err != nil {
		return nil, policyError(err)
	}
	out := explanationProto(&x.Explanation, x.ApprovalError)
	out.Sessions = x.Sessions
	return connect.NewResponse(out), nil
}

// explanationProto maps an Explanation to the API's ExplainResponse.
func explanationProto(x *policy.Explanation, approvalErr string) *toolwirev1.ExplainResponse {
	out := &toolwirev1.ExplainResponse{Decision: dispatch.DecisionRecord(&x.Decision), Layers: x.Layers, Others: int32(x.Others),
		ApprovalError: cmp.Or(x.Decision.ApprovalError, approvalErr)}
	for _, c := range x.Considered {
		r := c.Rule
		layer := "tenant"
		switch r.Layer {
		case policy.LayerAgent:
			layer = "agent " + r.Agent
		case policy.LayerMode:
			layer = "mode " + r.Agent
		}
		out.Rules = append(out.Rules, &toolwirev1.ExplainedRule{Id: r.ID, Layer: layer, Effect: r.Effect.String(),
			Matched: c.Matched, Reason: r.Reason, Note: c.Note, Line: int32(r.Line)})
	}
	for _, e := range x.Decision.Errors {
		out.Errors = append(out.Errors, e.Name()+": "+e.Err)
	}
	if g := x.Decision.Grant; g != nil {
		out.Grant = explainedGrant(g)
	}
	return out
}

// explainedGrant is the API form of a grant that covered a decision.
func explainedGrant(g *policy.Grant) *toolwirev1.Grant {
	pg := &toolwirev1.Grant{Id: g.ID, Layer: g.Layer.String(), Tenant: g.Tenant, Agent: g.Agent, Session: g.Session,
		Tool: g.Tool, Args: g.Args, ApprovalId: g.ApprovalID, Approver: g.Approver}
	if !g.Expires.IsZero() {
		pg.ExpiresAt = timestamppb.New(g.Expires)
	}
	return pg
}
