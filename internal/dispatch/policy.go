package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// PolicySource gives the policy in force for a tenant: nil = none (every
// call allowed but for tools that require approval, which ask). Every
// replica reads the same store, so every replica decides alike.
type PolicySource interface {
	For(tenant string) *policy.Policy
}

// policyFor returns the policy in force for tenant, nil without a source.
func (d *Dispatcher) policyFor(tenant string) *policy.Policy {
	if d.cfg.Policies == nil {
		return nil
	}
	return d.cfg.Policies.For(tenant)
}

// decide is the policy step of admission (DESIGN §6), after the schema:
// it decides the call, with the approval it presents (a verified token's
// binding; nil for none), and returns the decision to record. Arguments
// the canonical reader refuses (duplicate keys, invalid UTF-8 the schema
// let through) are answered VALIDATION: two readers must never see two
// different calls in one text.
func (d *Dispatcher) decide(id identity.Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, now time.Time, presented *policy.Approval) (policy.Decision, *policy.Args, *toolwirev1.ToolError) {
	p := d.policyFor(id.Tenant)
	if p == nil && presented == nil && !spec.GetRequiresApproval() && call.ApprovalToken == "" {
		// Nothing to decide: no policy allows every call of a tool that
		// does not require approval (and parsing its arguments once more
		// would cost every call).
		return policy.Decision{Outcome: policy.Allow}, nil, nil
	}
	args, err := policy.ParseArgs(call.Arguments)
	if err != nil {
		return policy.Decision{}, nil, registry.Violation("", err.Error())
	}
	in := policy.Input{Tool: spec, Args: args, Caller: call.Caller, Now: now, Grants: d.grantSource(), Approval: presented}
	return p.Decide(in), args, nil
}

// grantSource is where Decide finds grants: every replica's index of the
// grants in the approvals bucket, kept current by a watch
// (approvals.GrantIndex).
func (d *Dispatcher) grantSource() policy.GrantSource {
	if d.approvals == nil {
		return nil
	}
	return d.approvals.Grants()
}

// decisionRecord is what the audit keeps of a decision.
func decisionRecord(dec *policy.Decision) *toolwirev1.PolicyDecision {
	pd := &toolwirev1.PolicyDecision{
		Outcome:          outcomeOf(dec.Outcome),
		Version:          dec.Version,
		RuleId:           dec.RuleID(),
		RequiresApproval: dec.RequiresApproval,
		Reason:           dec.Reason(),
	}
	if dec.Default != 0 {
		pd.DefaultLayer = dec.Default.String()
	}
	if dec.Grant != nil {
		pd.GrantId = dec.Grant.ID
	}
	if dec.Approval != nil {
		pd.ApprovalId = dec.Approval.ID
	}
	return pd
}

func outcomeOf(e policy.Effect) toolwirev1.PolicyOutcome {
	switch e {
	case policy.Allow:
		return toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW
	case policy.Ask:
		return toolwirev1.PolicyOutcome_POLICY_OUTCOME_ASK
	case policy.Deny:
		return toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY
	}
	return toolwirev1.PolicyOutcome_POLICY_OUTCOME_UNSPECIFIED
}

// denied is the answer to a call the policy denies: the deciding rule's
// reason, never its text.
func denied(tool string, dec *policy.Decision) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		fmt.Sprintf("policy denies this call of %q: %s", tool, dec.Reason()))
	te.Suggestion = "do not retry this call as it is; an administrator can explain the decision with `toolctl policy explain`"
	return te
}

// asked is what the policy step leaves for after the idempotency key:
// park the call for an approver (an ask), or redeem the approval token
// that covered it.
type asked struct {
	pd   *toolwirev1.PolicyDecision
	spec *toolwirev1.ToolSpec
	args *policy.Args
	// reason is what the caller is told the approval is for
	// (Decision.Reason: never a rule's text).
	reason string
	// token is the verified binding of the approval token that covered the
	// call, nil for an ask; the call then takes its id (the parked call's)
	// and minted is the id admission gave it, under which a refusal is
	// recorded.
	token  *policy.Approval
	minted string
}

// applyPolicy runs the policy step for an admitted call: a deny is
// returned as the refusal; an ask as the approval to park the call for
// (asked; approve.go), and so is a call an approval token covers (its
// token is redeemed, approve.go); an allow stamps the call with what
// allowed it. A token is taken off the call whatever happens: it is never
// stored or published.
func (d *Dispatcher) applyPolicy(ctx context.Context, id identity.Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, now time.Time) (*toolwirev1.PolicyDecision, *toolwirev1.ToolError, *asked) {
	if p := d.policyFor(id.Tenant); isHookCall(ctx) && p.IsHook(call.Tool) {
		// The dispatcher's own call of a hook the document binds: the
		// operator named it, the rules are not asked.
		call.ApprovalToken = ""
		call.PolicyVersion, call.PolicyRule = p.Version(), "hook-call"
		return &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, Version: p.Version(), RuleId: "hook-call"}, nil, nil
	}
	var presented *policy.Approval
	if token := call.ApprovalToken; token != "" {
		call.ApprovalToken = ""
		var te *toolwirev1.ToolError
		if presented, te = d.approvals.VerifyToken(id, spec.Name, token); te != nil {
			return nil, te, nil
		}
	}
	dec, args, te := d.decide(id, spec, call, now, presented)
	if te != nil {
		return nil, te, nil
	}
	pd := decisionRecord(&dec)
	switch dec.Outcome {
	case policy.Deny:
		return pd, denied(spec.Name, &dec), nil
	case policy.Ask:
		if presented != nil {
			return pd, approvalflow.TokenRefused(spec.Name, "it does not cover this call: "+dec.ApprovalError), nil
		}
		call.PolicyVersion, call.PolicyRule = pd.Version, pd.RuleId
		return pd, nil, &asked{pd: pd, spec: spec, args: args, reason: dec.Reason()}
	}
	call.PolicyVersion, call.PolicyRule = pd.Version, pd.RuleId
	call.ApprovalId, call.GrantId = pd.ApprovalId, pd.GrantId
	if dec.Approval != nil {
		return pd, nil, &asked{pd: pd, spec: spec, args: args, reason: dec.Reason(), token: dec.Approval}
	}
	return pd, nil, nil
}
