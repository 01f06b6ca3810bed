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

// definitionStep finds the definition of the spec the call runs (lookup
// resolved the version the session pins; the pin step runs it again for
// a version another call pinned first) that the request's model family
// and the session's mode are offered (registry.Definition;
// docs/toolsets.md, "Definitions in the spec"): a tool it hides is
// refused PERMISSION_DENIED naming the definition, as a tool the policy's
// toolset hides is, before the pin step writes anything; a definition
// with an input schema is checked by variantStep. Like a toolset, a
// definition only takes away: the rules still decide every call it lets
// through. A hook's own call (the dispatcher's) is exempt, as it is from
// the session step: the operator bound it.
func (a *admission) definitionStep(ctx context.Context) verdict {
	if isHookCall(ctx) {
		return next
	}
	mode := a.session.Mode
	def, i := registry.Definition(a.spec, a.family, mode)
	if def.GetHidden() {
		why := registry.DefinitionRefusal(a.spec.Name, a.family, mode, i)
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, why), nil)
	}
	a.def = def
	return next
}

// variantStep checks the arguments, which passed the tool's own schema
// (the arguments step), against the input schema of the spec's definition
// the call is offered (definitionStep) and the schema variant the
// family's toolset offers, if any: a call must satisfy each (VALIDATION
// naming the definition or the toolset otherwise). A before-hook's
// rewrite is held to the tool's schema only: these bind what the model
// sends.
func (a *admission) variantStep(_ context.Context) verdict {
	if s := a.def.GetInputSchemaJson(); s != "" {
		sch, err := registry.DefaultSchemas.Compile(s)
		if err != nil { // registry.Check compiled it; a spec stored around the check is refused
			return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "the tool's definition for this model and mode has a schema that does not compile"), nil)
		}
		if te := registry.CheckParsedAgainst(sch, a.doc); te != nil {
			te.Message = fmt.Sprintf("%s (the input schema of the definition %s offered)", te.Message, a.definedFor())
			return a.refused(te, nil)
		}
	}
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

// definedFor names whom the call's definition is for, for a refusal.
func (a *admission) definedFor() string {
	switch f, m := a.family, a.session.Mode; {
	case f != "" && m != "":
		return fmt.Sprintf("model family %s in mode %q is", f, m)
	case f != "":
		return "model family " + f + " is"
	case m != "":
		return fmt.Sprintf("mode %q is", m)
	}
	return "every caller is"
}

// mayList reports whether the caller may list tool in its session's
// mode, as VisibleToolsFor would list it: it is registered (at the
// version its session pins, if any: listEntries), the caller has its
// scopes, the policy in force does not forbid it in the mode
// (listableIn), and neither the family's toolset nor the tool's
// definition for the family and mode hides it (offeredAs).
func (a *admission) mayList(ctx context.Context, tool string) bool {
	ent, err := a.d.reg.Get(tool)
	if v, pinned := a.session.Pinned(tool); pinned && (err != nil || v != ent.Spec.Version) {
		if ent, err = a.d.pinnedEntry(ctx, tool, v), nil; ent == nil {
			return false
		}
	}
	if err != nil || !registry.HasScopes(a.id.Scopes, ent.Spec.Scopes) || !a.d.listableIn(a.id, a.session.Mode)(tool) {
		return false
	}
	_, ok := offeredAs(a.toolset, ent.Spec, a.family, a.session.Mode)
	return ok
}
