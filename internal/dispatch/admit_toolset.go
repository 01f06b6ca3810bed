package dispatch

import (
	"context"
	"fmt"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// toolsetStep applies the toolset of the request's model family
// (docs/toolsets.md): a model name that is not one (policy.ModelNameRE)
// is refused VALIDATION; a tool the family's toolset hides or substitutes
// is refused PERMISSION_DENIED with a reason naming the toolset (rule
// "toolsets.<family>"). The family is derived once, here, with the policy
// in force, and carried in the call's Caller (caller.model_family). A
// toolset only takes away: the rules still decide every call it lets
// through.
func (a *admission) toolsetStep(ctx context.Context) verdict {
	model := a.req.GetModel()
	if model == "" {
		return next
	}
	if len(model) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(model) {
		return a.refused(registry.Violation("", fmt.Sprintf("model is not a model name (letters, digits and . _ : / @ + -, at most %d bytes)", policy.MaxModelBytes)), nil)
	}
	p := a.d.policyFor(a.id.Tenant)
	a.family = p.ModelFamily(model)
	a.toolset = p.Toolset(a.family)
	if ok, why := a.toolset.Offered(a.spec.Name); !ok {
		if alt := a.toolset.Substitute(a.spec.Name); alt != "" && !a.mayList(ctx, alt) {
			// The substitute is named only to a caller who may list it.
			why = fmt.Sprintf("tool %s is not offered to model family %s (substituted by toolset %s)", a.spec.Name, a.family, a.family)
		}
		rule := "toolsets." + a.family
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, why),
			&toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, RuleId: rule, Reason: why, Version: p.Version()})
	}
	return next
}

// variantStep checks the arguments, which passed the tool's own schema
// (the arguments step), against the schema variant the family was
// offered, if any: a call must satisfy both (VALIDATION naming the
// toolset otherwise). A before-hook's rewrite is held to the tool's
// schema only: the variant binds what the model sends.
func (a *admission) variantStep(_ context.Context) verdict {
	v := a.toolset.Variant(a.spec.Name)
	if v == nil {
		return next
	}
	if te := registry.CheckParsedAgainst(v.InputSchema(), a.doc); te != nil {
		te.Message = fmt.Sprintf("%s (the schema variant toolset %s offers)", te.Message, a.family)
		return a.refused(te, nil)
	}
	return next
}

// mayList reports whether the caller may list tool: it is registered,
// the caller has its scopes and the policy in force does not forbid it
// (VisibleTool).
func (a *admission) mayList(ctx context.Context, tool string) bool {
	_, err := a.d.VisibleTool(ctx, a.id, tool, "")
	return err == nil
}
