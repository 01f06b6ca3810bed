package dispatch

import (
	"context"
	"encoding/json"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/skills"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// SkillsFor returns the `skill` tool as id sees it for lf (as
// VisibleToolsFor lists it; nil when id may not see it) and the skills of
// its spec whose load the policy in force does not deny id: the policy
// decides a call {"name": <skill>} of the tool for id's caller in lf's
// mode, as admission would, less what only a call has (its session's
// other fields, approvals, grants, limits). A skill decided ask is
// listed; loading it asks. What this lists is what MCP's Skills
// extension serves (skills/list, skills/get); reading a skill's file is
// a call of the tool, decided in full by admission.
func (d *Dispatcher) SkillsFor(ctx context.Context, id identity.Identity, lf ListFor) (*toolwirev1.ToolSpec, []*toolwirev1.Skill, error) {
	st, err := d.listSession(ctx, id, lf)
	if err != nil {
		return nil, nil, err
	}
	mode := st.Mode
	var spec *toolwirev1.ToolSpec
	for _, s := range d.visibleTools(ctx, id, registry.Filter{NameGlob: skills.ToolName}, listedFor{mode: mode, model: lf.Model, pins: st.Pins}) {
		if s.GetName() == skills.ToolName {
			spec = s
		}
	}
	if spec == nil {
		return nil, nil, nil
	}
	p := d.policyFor(id.Tenant)
	if p == nil {
		return spec, spec.GetSkills(), nil
	}
	caller := &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent, Scopes: id.Scopes, Mode: p.Sessions().ModeOf(mode), Model: lf.Model}
	out := make([]*toolwirev1.Skill, 0, len(spec.GetSkills()))
	for _, sk := range spec.GetSkills() {
		raw, _ := json.Marshal(skills.Args{Name: sk.GetName()})
		args, err := policy.ParseArgs(raw)
		if err != nil {
			continue
		}
		if p.Decide(policy.Input{Tool: spec, Args: args, Caller: caller}).Outcome != policy.Deny {
			out = append(out, sk)
		}
	}
	return spec, out, nil
}
