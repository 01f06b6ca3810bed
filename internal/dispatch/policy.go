package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
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
// it decides the call and returns the decision to record. Arguments the
// canonical reader refuses (duplicate keys, invalid UTF-8 the schema let
// through) are answered VALIDATION: two readers must never see two
// different calls in one text.
func (d *Dispatcher) decide(id Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, now time.Time) (policy.Decision, *policy.Args, *toolwirev1.ToolError) {
	p := d.policyFor(id.Tenant)
	if p == nil && !spec.GetRequiresApproval() && call.ApprovalToken == "" {
		// Nothing to decide: no policy allows every call of a tool that
		// does not require approval (and parsing its arguments once more
		// would cost every call).
		return policy.Decision{Outcome: policy.Allow}, nil, nil
	}
	args, err := policy.ParseArgs(call.Arguments)
	if err != nil {
		return policy.Decision{}, nil, registry.Violation("", err.Error())
	}
	in := policy.Input{Tool: spec, Args: args, Caller: call.Caller, Now: now, Grants: d.grantSource()}
	return p.Decide(in), args, nil
}

// grantSource is where Decide finds grants: none until approvals are
// wired.
func (d *Dispatcher) grantSource() policy.GrantSource { return nil }

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

// applyPolicy runs the policy step for an admitted call: a deny or an ask
// is returned as the refusal (an ask fails closed until it can be parked);
// an allow stamps the call with what allowed it.
func (d *Dispatcher) applyPolicy(_ context.Context, id Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, now time.Time) (*toolwirev1.PolicyDecision, *toolwirev1.ToolError) {
	dec, _, te := d.decide(id, spec, call, now)
	if te != nil {
		return nil, te
	}
	pd := decisionRecord(&dec)
	switch dec.Outcome {
	case policy.Deny:
		return pd, denied(spec.Name, &dec)
	case policy.Ask:
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
			fmt.Sprintf("this call of %q needs approval: %s", spec.Name, dec.Reason()))
		return pd, te
	}
	call.PolicyVersion, call.PolicyRule = pd.Version, pd.RuleId
	call.ApprovalId, call.GrantId = pd.ApprovalId, pd.GrantId
	return pd, nil
}
