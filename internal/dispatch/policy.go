package dispatch

import (
	"fmt"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policyops"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// PolicySource gives the policy in force for a tenant: nil = none (every
// call allowed but for tools that require approval, which ask). Every
// replica reads the same store, so every replica decides alike.
type PolicySource interface {
	For(tenant string) *policy.Policy
}

// PolicyOps applies, shows and explains the policy documents of the
// replica's store (internal/policyops) for the policy RPCs of the API's
// faces.
func (d *Dispatcher) PolicyOps() *policyops.Ops { return d.policyOps }

// policyFor returns the policy in force for tenant, nil without a source.
func (d *Dispatcher) policyFor(tenant string) *policy.Policy {
	if d.cfg.Policies == nil {
		return nil
	}
	return d.cfg.Policies.For(tenant)
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

// DecisionRecord is what the audit keeps of a decision, and what the
// Explain RPC answers (internal/api).
func DecisionRecord(dec *policy.Decision) *toolwirev1.PolicyDecision {
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

// modeRestricted is the refusal of a call the session's mode forbids
// (Decision.ModeRestricted): MODE_RESTRICTED, naming the mode and the rule
// (or the mode's default), and the rule's reason.
func modeRestricted(tool, mode, rule string, dec *policy.Decision) *toolwirev1.ToolError {
	by := "its default"
	if rule != "" {
		by = fmt.Sprintf("rule %q", rule)
	}
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED,
		fmt.Sprintf("mode %q forbids this call of %q (%s): %s", mode, tool, by, dec.Reason()))
	te.Suggestion = "not in this mode: the orchestrator can change the session's mode (`toolctl session mode`)"
	return te
}

// undeclaredMode is the refusal of a call in a session whose mode the
// policy in force does not declare: MODE_RESTRICTED, fail closed.
func undeclaredMode(mode string) *toolwirev1.ToolError {
	return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED,
		fmt.Sprintf("the session's mode %q is not one the policy in force declares", mode))
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
