package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The policy RPCs: apply, show and list a tenant's policy documents, and
// explain a decision. Every one needs the admin scope; the tenant is the
// caller's, from its credentials, never from the request.

// requireAdmin returns the caller's identity when it holds the admin
// scope, else the PermissionDenied error naming what needed it.
func requireAdmin(ctx context.Context, what string) (identity.Identity, error) {
	id, err := identityOf(ctx)
	if err != nil {
		return identity.Identity{}, err
	}
	if !registry.HasScopes(id.Scopes, []string{AdminScope}) {
		return identity.Identity{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s needs the %q scope", what, AdminScope))
	}
	return id, nil
}

// tenantScope is the caller's tenant as a policy scope.
func tenantScope(id identity.Identity) (policystore.Scope, error) {
	s, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return s, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return s, nil
}

// policyError answers a policystore error: a refused document or comment
// is invalid_argument (the message names the lines), an unknown version
// not_found, a store failure unavailable.
func policyError(err error) error {
	switch {
	case errors.Is(err, policy.ErrInvalid), errors.Is(err, policy.ErrTestsFailed),
		errors.Is(err, policystore.ErrBadComment), errors.Is(err, policystore.ErrBadScope):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, policystore.ErrUnknownVersion), errors.Is(err, policystore.ErrNoPolicy):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, policystore.ErrQuota):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return toConnectErr(err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// errNoPolicySource: the dispatcher was built without Config.Policies, so
// a document applied through it would be stored but not enforced by it.
var errNoPolicySource = errors.New("this dispatcher enforces no policy documents (no policy source configured)")

// policyWaiter is a PolicySource that can wait until this replica has a
// version in force (policystore.Holder).
type policyWaiter interface {
	Wait(ctx context.Context, scope policystore.Scope, version string, revision uint64) error
}

// policyWait bounds how long ApplyPolicy waits for its document to be in
// force on its own replica.
const policyWait = 5 * time.Second

// toolLookup gives a policy document's tests the registry's current specs.
func (d *Dispatcher) toolLookup(name string) *toolwirev1.ToolSpec {
	e, err := d.reg.Get(name)
	if err != nil {
		return nil
	}
	return e.Spec
}

// ApplyPolicy checks a policy document (it parses, its CEL compiles, its
// tests pass against the registry's specs) and, unless it is a dry run,
// stores it and puts it in force for the caller's tenant, in place of the
// installation document. It answers once the document is in force on this
// replica (at most policyWait; InForce says whether it is); the others
// follow within about a second.
func (s *Service) ApplyPolicy(ctx context.Context, req *connect.Request[toolwirev1.ApplyPolicyRequest]) (*connect.Response[toolwirev1.ApplyPolicyResponse], error) {
	id, err := requireAdmin(ctx, "applying a policy")
	if err != nil {
		return nil, err
	}
	if s.d.cfg.Policies == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errNoPolicySource)
	}
	if n := len(req.Msg.Document); n > policy.MaxDocumentBytes {
		return nil, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("policy document of %d bytes; at most %d", n, policy.MaxDocumentBytes))
	}
	scope, err := tenantScope(id)
	if err != nil {
		return nil, err
	}
	res, err := s.d.policies.Apply(ctx, scope, []byte(req.Msg.Document), policystore.ApplyOptions{
		AppliedBy: id.Agent, Comment: req.Msg.Comment, DryRun: req.Msg.DryRun, Lookup: s.d.toolLookup})
	if err != nil {
		return nil, policyError(err)
	}
	inForce := false
	if w, ok := s.d.cfg.Policies.(policyWaiter); ok && !req.Msg.DryRun {
		wctx, cancel := context.WithTimeout(ctx, policyWait)
		err := w.Wait(wctx, scope, res.Version.Version, res.Revision)
		cancel()
		if inForce = err == nil; !inForce {
			s.d.log.WarnContext(ctx, "applied policy not in force on this replica", "tenant", id.Tenant,
				"version", res.Version.Version, "err", err)
		}
	}
	return connect.NewResponse(&toolwirev1.ApplyPolicyResponse{Version: versionProto(res.Version), Changed: res.Changed,
		TestsPassed: int32(res.TestsPassed), InForce: inForce}), nil
}

// RemovePolicy takes the caller's tenant's own document out of force; the
// tenant falls back to the installation document. It answers once this
// replica has the removal in force (at most policyWait).
func (s *Service) RemovePolicy(ctx context.Context, req *connect.Request[toolwirev1.RemovePolicyRequest]) (*connect.Response[toolwirev1.RemovePolicyResponse], error) {
	id, err := requireAdmin(ctx, "removing a policy")
	if err != nil {
		return nil, err
	}
	if s.d.cfg.Policies == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errNoPolicySource)
	}
	scope, err := tenantScope(id)
	if err != nil {
		return nil, err
	}
	removed, rev, err := s.d.policies.Remove(ctx, scope)
	if err != nil {
		return nil, policyError(err)
	}
	if w, ok := s.d.cfg.Policies.(policyWaiter); ok && removed {
		wctx, cancel := context.WithTimeout(ctx, policyWait)
		if err := w.Wait(wctx, scope, "", rev); err != nil {
			s.d.log.WarnContext(ctx, "policy removal not in force on this replica", "tenant", id.Tenant, "err", err)
		}
		cancel()
	}
	out := &toolwirev1.RemovePolicyResponse{Removed: removed}
	if doc, err := s.d.policies.Current(ctx, policystore.Installation); err == nil {
		out.InForce = versionProto(doc.Version)
	} else if !errors.Is(err, policystore.ErrNoPolicy) {
		return nil, policyError(err)
	}
	if removed {
		s.d.log.InfoContext(ctx, "tenant policy removed", "tenant", id.Tenant, "by", id.Agent)
	}
	return connect.NewResponse(out), nil
}

// GetPolicy returns the document in force for the caller's tenant (its
// own, else the installation document, with tenant "*"), or one version
// of either.
func (s *Service) GetPolicy(ctx context.Context, req *connect.Request[toolwirev1.GetPolicyRequest]) (*connect.Response[toolwirev1.GetPolicyResponse], error) {
	id, err := requireAdmin(ctx, "reading a policy")
	if err != nil {
		return nil, err
	}
	scope, err := tenantScope(id)
	if err != nil {
		return nil, err
	}
	doc, err := s.d.policyDocument(ctx, scope, req.Msg.Version)
	if errors.Is(err, policystore.ErrNoPolicy) {
		return connect.NewResponse(&toolwirev1.GetPolicyResponse{}), nil
	}
	if err != nil {
		return nil, policyError(err)
	}
	return connect.NewResponse(&toolwirev1.GetPolicyResponse{Version: versionProto(doc.Version), Document: string(doc.Source)}), nil
}

// policyDocument returns the document of version ("" = the one in force)
// for scope, looking in the installation's when the tenant has none.
func (d *Dispatcher) policyDocument(ctx context.Context, scope policystore.Scope, version string) (*policystore.Document, error) {
	if version == "" {
		doc, err := d.policies.Current(ctx, scope)
		if errors.Is(err, policystore.ErrNoPolicy) {
			return d.policies.Current(ctx, policystore.Installation)
		}
		return doc, err
	}
	doc, err := d.policies.Get(ctx, scope, version)
	if errors.Is(err, policystore.ErrUnknownVersion) && policystore.ValidVersion(version) {
		return d.policies.Get(ctx, policystore.Installation, version)
	}
	return doc, err
}

// ListPolicyVersions lists the applies of the caller's tenant's own
// document, newest first; a tenant that never had one gets the
// installation document's (tenant "*").
func (s *Service) ListPolicyVersions(ctx context.Context, req *connect.Request[toolwirev1.ListPolicyVersionsRequest]) (*connect.Response[toolwirev1.ListPolicyVersionsResponse], error) {
	id, err := requireAdmin(ctx, "listing policy versions")
	if err != nil {
		return nil, err
	}
	scope, err := tenantScope(id)
	if err != nil {
		return nil, err
	}
	limit := int(req.Msg.Limit)
	switch {
	case limit <= 0:
		limit = 20
	case limit > policystore.HistoryDepth:
		limit = policystore.HistoryDepth
	}
	hist, err := s.d.policies.History(ctx, scope, limit)
	if errors.Is(err, policystore.ErrNoPolicy) {
		hist, err = s.d.policies.History(ctx, policystore.Installation, limit)
	}
	if err != nil && !errors.Is(err, policystore.ErrNoPolicy) {
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

// Explain decides a call of the caller's tenant as admission would (after
// the schema; the call is not validated or run) and says why: every rule
// that names the tool, with its layer, whether it matched and why. The
// caller is the request's agent (default: the caller's own, with its
// scopes), session, user and run, in the caller's tenant.
func (s *Service) Explain(ctx context.Context, req *connect.Request[toolwirev1.ExplainRequest]) (*connect.Response[toolwirev1.ExplainResponse], error) {
	id, err := requireAdmin(ctx, "explaining a decision")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.Tool == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("tool is required"))
	}
	ent, err := s.d.reg.GetVersion(ctx, m.Tool, m.SpecVersion)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	args, err := policy.ParseArgs([]byte(m.ArgumentsJson))
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("VALIDATION: arguments_json: %w", err))
	}
	caller := &toolwirev1.Caller{Tenant: id.Tenant, Agent: cmp.Or(m.Agent, id.Agent), Session: m.Session, User: m.User,
		Run: m.Run, Scopes: m.Scopes}
	if len(m.Scopes) == 0 && caller.Agent == id.Agent {
		caller.Scopes = id.Scopes
	}
	p := s.d.policyFor(id.Tenant)
	if m.PolicyVersion != "" {
		scope, err := tenantScope(id)
		if err != nil {
			return nil, err
		}
		doc, err := s.d.policyDocument(ctx, scope, m.PolicyVersion)
		if err != nil {
			return nil, policyError(err)
		}
		if p, err = policy.Parse(doc.Source); err != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("stored policy %s: %w", m.PolicyVersion, err))
		}
	}
	in := policy.Input{Tool: ent.Spec, Args: args, Caller: caller, Grants: s.d.grantSource(), Now: time.Now()}
	var approvalErr string
	if m.ApprovalId != "" {
		if in.Approval, err = s.d.approvalFor(ctx, id, m.ApprovalId); err != nil {
			approvalErr = err.Error()
		}
	}
	x := p.Explain(in)
	return connect.NewResponse(explanationProto(&x, approvalErr)), nil
}

// approvalFor returns the binding of the approval approvalID names in the
// caller's tenant, for Explain to decide as if the call presented it: an
// approval that was not approved (pending, denied, expired) binds nothing.
func (d *Dispatcher) approvalFor(ctx context.Context, id identity.Identity, approvalID string) (*policy.Approval, error) {
	rec, err := d.approvals.Record(ctx, id.Tenant, approvalID)
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", approvalID, err)
	}
	if rec.Binding == nil {
		return nil, fmt.Errorf("approval %s is %s, not approved", approvalID, rec.Approval.GetState())
	}
	return rec.Binding, nil
}

// explanationProto maps an Explanation to the API's ExplainResponse.
func explanationProto(x *policy.Explanation, approvalErr string) *toolwirev1.ExplainResponse {
	out := &toolwirev1.ExplainResponse{Decision: decisionRecord(&x.Decision), Layers: x.Layers, Others: int32(x.Others),
		ApprovalError: cmp.Or(x.Decision.ApprovalError, approvalErr)}
	for _, c := range x.Considered {
		r := c.Rule
		layer := "tenant"
		if r.Layer == policy.LayerAgent {
			layer = "agent " + r.Agent
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
