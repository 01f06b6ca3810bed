package policyops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ExplainRequest is a call to decide, and the policy to decide it with.
type ExplainRequest struct {
	// Tool and SpecVersion ("" = the current) name the tool; Tool is
	// required.
	Tool, SpecVersion string
	// Arguments is the call's arguments (JSON); empty = {}.
	Arguments []byte
	// Agent ("" = the caller's own), Session, User and Run are the
	// caller's, in the caller's tenant; Scopes its scopes (none given for
	// the caller's own agent = the caller's).
	Agent, Session, User, Run string
	Scopes                    []string
	// PolicyVersion is a stored version of the tenant's (or the
	// installation's) document to decide with; "" = the one in force.
	PolicyVersion string
	// ApprovalID names an approval of the tenant the call presents.
	ApprovalID string
	// Mode decides as if the call's session were in this mode
	// (caller.mode); "" = none. It is not read from Session: a session's
	// mode changes, the question is the administrator's.
	Mode string
	// Model decides as if the call were made for this model (caller.model,
	// and caller.model_family derived with the policy decided with);
	// "" = none.
	Model string
}

// Explanation is a decision and why.
type Explanation struct {
	policy.Explanation
	// ApprovalError says why the approval the request named binds
	// nothing (unknown, or not approved); "" when it binds, or none was
	// named.
	ApprovalError string
	// Sessions is the policy's session rules and what they do to the
	// call (policy.SessionRules.Explain); "" when it has none.
	Sessions string
}

// Explain decides a call of the caller's tenant as admission would (after
// the schema; the call is not validated or run) and says why: every rule
// that names the tool, with its layer, whether it matched and why.
// Errors: ErrNotAdmin, ErrBadRequest (no tool; arguments
// policy.ParseArgs refuses, as "VALIDATION: arguments_json: ..."; a Mode
// the policy decided with does not declare, whose calls admission
// refuses MODE_RESTRICTED whatever they are). Without a Mode the call is
// decided in the policy's sessions.default_mode, as admission decides it,
// and Sessions says what the policy's session rules do to it (a call
// naming no session under sessions.required never reaches the rules),
// registry.ErrNotFound, ErrUnavailable (the registry could not be read),
// ErrStoredPolicy, and for a PolicyVersion policystore.ErrBadScope,
// policystore.ErrUnknownVersion or a store failure.
func (o *Ops) Explain(ctx context.Context, id identity.Identity, r ExplainRequest) (*Explanation, error) {
	if err := requireAdmin(id, "explaining a decision"); err != nil {
		return nil, err
	}
	if r.Tool == "" {
		return nil, ofKind(ErrBadRequest, errors.New("tool is required"))
	}
	ent, err := o.cfg.Specs.GetVersion(ctx, r.Tool, r.SpecVersion)
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		err = ofKind(ErrUnavailable, err)
	}
	if err != nil {
		return nil, err
	}
	args, err := policy.ParseArgs(r.Arguments)
	if err != nil {
		return nil, ofKind(ErrBadRequest, fmt.Errorf("VALIDATION: arguments_json: %w", err))
	}
	p, err := o.explainWith(ctx, id, r.PolicyVersion)
	if err != nil {
		return nil, err
	}
	if m := r.Model; m != "" && (len(m) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(m)) {
		return nil, ofKind(ErrBadRequest, fmt.Errorf("model %q is not a model name (letters, digits and . _ : / @ + -, at most %d bytes)", m, policy.MaxModelBytes))
	}
	if r.Mode != "" && p != nil && !p.HasMode(r.Mode) {
		return nil, ofKind(ErrBadRequest, fmt.Errorf("mode %q: the policy declares no such mode (admission refuses every call in it)", r.Mode))
	}
	in := policy.Input{Tool: ent.Spec, Args: args, Caller: explainedCaller(id, &r), Grants: o.cfg.Grants, Now: time.Now()}
	in.Caller.Model, in.Caller.ModelFamily = r.Model, p.ModelFamily(r.Model) // as admission derives it
	rules := p.Sessions()
	defaulted := in.Caller.Mode == "" && rules.DefaultMode != ""
	in.Caller.Mode = rules.ModeOf(in.Caller.Mode) // as admission decides a call without a mode
	var approvalErr string
	if r.ApprovalID != "" {
		if in.Approval, err = o.approval(ctx, id, r.ApprovalID); err != nil {
			approvalErr = err.Error()
		}
	}
	return &Explanation{Explanation: p.Explain(in), ApprovalError: approvalErr,
		Sessions: rules.Explain(in.Caller.Session, in.Caller.Mode, defaulted)}, nil
}

// explainedCaller is the caller Explain decides for.
func explainedCaller(id identity.Identity, r *ExplainRequest) *toolwirev1.Caller {
	c := &toolwirev1.Caller{Tenant: id.Tenant, Agent: cmp.Or(r.Agent, id.Agent), Session: r.Session, User: r.User,
		Run: r.Run, Scopes: r.Scopes, Mode: r.Mode}
	if len(r.Scopes) == 0 && c.Agent == id.Agent {
		c.Scopes = id.Scopes
	}
	return c
}

// explainWith returns the policy Explain decides with: the one in force
// for the caller's tenant, or the stored version.
func (o *Ops) explainWith(ctx context.Context, id identity.Identity, version string) (*policy.Policy, error) {
	if version == "" {
		return o.policyFor(id.Tenant), nil
	}
	scope, err := policystore.TenantScope(id.Tenant)
	if err != nil {
		return nil, err
	}
	doc, err := o.document(ctx, scope, version)
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse(doc.Source)
	if err != nil {
		return nil, ofKind(ErrStoredPolicy, fmt.Errorf("stored policy %s: %w", version, err))
	}
	return p, nil
}

// approval returns the binding of the approval approvalID names in the
// caller's tenant, for Explain to decide as if the call presented it: an
// approval that was not approved (pending, denied, expired) binds nothing.
func (o *Ops) approval(ctx context.Context, id identity.Identity, approvalID string) (*policy.Approval, error) {
	rec, err := o.cfg.Approvals.Record(ctx, id.Tenant, approvalID)
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", approvalID, err)
	}
	if rec.Binding == nil {
		return nil, fmt.Errorf("approval %s is %s, not approved", approvalID, rec.Approval.GetState())
	}
	return rec.Binding, nil
}
