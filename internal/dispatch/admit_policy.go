package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// policyStep is the policy and approval step (DESIGN §6), after the
// before-hooks: the policy in force decides the call (internal/policy). A
// deny is the refusal; an ask is left for the approval step (park), and so
// is a call an approval token covers (redeem); an allow stamps the call
// with what allowed it. A token is taken off the call whatever happens: it
// is never stored or published. When a before-hook asked and no rule
// denies (deny wins), the hook's ask stands.
func (a *admission) policyStep(ctx context.Context) verdict {
	if te := a.applyPolicy(ctx); te != nil {
		return a.refused(te, a.pd)
	}
	if a.ask == nil && a.hookAsk != nil {
		a.ask, a.pd = a.hookAsk, a.hookAsk.pd
	}
	return next
}

// applyPolicy decides the call and records the decision in a.pd (and an
// ask or redeemed token in a.ask); it returns the refusal, if any.
func (a *admission) applyPolicy(ctx context.Context) *toolwirev1.ToolError {
	d := a.d
	call, spec := a.call, a.spec
	if p := d.policyFor(a.id.Tenant); isHookCall(ctx) && p.IsHook(call.Tool) {
		// The dispatcher's own call of a hook the document binds: the
		// operator named it, the rules are not asked.
		call.ApprovalToken = ""
		call.PolicyVersion, call.PolicyRule = p.Version(), "hook-call"
		a.pd = &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, Version: p.Version(), RuleId: "hook-call"}
		return nil
	}
	var presented *policy.Approval
	if token := call.ApprovalToken; token != "" {
		call.ApprovalToken = ""
		var te *toolwirev1.ToolError
		if presented, te = d.approvals.VerifyToken(a.id, spec.Name, token); te != nil {
			return te
		}
	}
	dec, te := a.decide(presented)
	if te != nil {
		return te
	}
	a.pd = DecisionRecord(&dec)
	switch dec.Outcome {
	case policy.Deny:
		if mode, rule, ok := dec.ModeRestricted(); ok {
			return modeRestricted(spec.Name, mode, rule, &dec)
		}
		return denied(spec.Name, &dec)
	case policy.Ask:
		if presented != nil {
			return approvalflow.TokenRefused(spec.Name, "it does not cover this call: "+dec.ApprovalError)
		}
		call.PolicyVersion, call.PolicyRule = a.pd.Version, a.pd.RuleId
		a.ask = &asked{pd: a.pd, spec: spec, args: a.parsed, reason: dec.Reason()}
		return nil
	}
	call.PolicyVersion, call.PolicyRule = a.pd.Version, a.pd.RuleId
	call.ApprovalId, call.GrantId = a.pd.ApprovalId, a.pd.GrantId
	if dec.Approval != nil {
		a.ask = &asked{pd: a.pd, spec: spec, args: a.parsed, reason: dec.Reason(), token: dec.Approval}
	}
	return nil
}

// decide asks the policy in force about the call, with the approval it
// presents (a verified token's binding; nil for none). Arguments
// policy.ParseArgs refuses are answered VALIDATION: a value other than an
// object (a schema may allow one); the rest it refuses registry.CheckArgs
// refused before, both reading the text with internal/jsonvalue.
func (a *admission) decide(presented *policy.Approval) (policy.Decision, *toolwirev1.ToolError) {
	d := a.d
	p := d.policyFor(a.id.Tenant)
	if mode := a.call.Caller.GetMode(); mode != "" && p != nil && !p.HasMode(mode) {
		return policy.Decision{}, undeclaredMode(mode)
	}
	if p == nil && presented == nil && !a.spec.GetRequiresApproval() {
		// Nothing to decide: no policy allows every call of a tool that
		// does not require approval (and parsing its arguments once more
		// would cost every call).
		return policy.Decision{Outcome: policy.Allow}, nil
	}
	args, err := a.policyArgs()
	if err != nil {
		return policy.Decision{}, registry.Violation("", err.Error())
	}
	in := policy.Input{Tool: a.spec, Args: args, Caller: a.call.Caller, Now: a.now, Grants: d.grantSource(), Approval: presented}
	return p.Decide(in), nil
}
