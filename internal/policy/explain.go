package policy

import (
	"fmt"
	"strings"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Explanation is a Decision with the reasoning behind it, for
// administrators (the Explain RPC, `toolctl policy explain`). Unlike a
// Decision it shows rules' text and argument values: never hand it to the
// caller of a call.
type Explanation struct {
	// Decision is exactly what Decide answers for the same Input.
	Decision Decision
	// Tool and Caller are the call's.
	Tool   string
	Caller *toolwirev1.Caller
	// Layers are the applicable layers with their defaults, e.g.
	// "tenant (default allow)", "agent support-bot (default deny)", or
	// "agent bot: no layer".
	Layers []string
	// Considered are the rules of the applicable layers whose tools globs
	// match the tool, by layer, effect (deny, ask, allow), then id, each
	// with whether it matched and why. Unlike Decision.Matched it lists
	// every such rule, also those a deny made irrelevant.
	Considered []Considered
	// Others counts the rules of the applicable layers that do not name
	// the tool.
	Others int
}

// Considered is one rule Explain looked at.
type Considered struct {
	Rule    *RuleInfo
	Matched bool
	// Note says why the rule matched or did not: the argument values
	// against their patterns, the condition's value or its error.
	Note string
}

// Explain decides like Decide and says why (see Explanation). It
// evaluates every rule that names the tool, so it costs more than Decide.
func (p *Policy) Explain(in Input) Explanation {
	x := Explanation{Decision: p.Decide(in), Tool: in.Tool.GetName(), Caller: in.Caller}
	if p == nil {
		x.Layers = []string{"no policy"}
		return x
	}
	layers := p.layersFor(in.Caller)
	e := evaluator{in: in}
	for i, l := range layers {
		if l == nil {
			if i == 1 && in.Caller.GetAgent() != "" {
				x.Layers = append(x.Layers, fmt.Sprintf("agent %s: no layer", in.Caller.GetAgent()))
			}
			if i == 2 && in.Caller.GetMode() != "" {
				x.Layers = append(x.Layers, fmt.Sprintf("mode %s: not declared", in.Caller.GetMode()))
			}
			continue
		}
		x.Layers = append(x.Layers, l.describe())
		c := l.candidatesFor(x.Tool)
		x.Others += len(l.rules) - c.n
		for _, eff := range [...]Effect{Deny, Ask, Allow} {
			for _, r := range c.by[eff] {
				x.Considered = append(x.Considered, e.consider(r))
			}
		}
	}
	return x
}

func (l *layer) describe() string {
	name := "tenant"
	switch l.kind {
	case LayerAgent:
		name = "agent " + l.agent
	case LayerMode:
		name = "mode " + l.agent
	}
	if l.def == 0 {
		return name + " (no default)"
	}
	return fmt.Sprintf("%s (default %s)", name, l.def)
}

// consider evaluates r as Decide does and says why it (did not) match.
func (e *evaluator) consider(r *rule) Considered {
	c := Considered{Rule: &r.info}
	args := e.in.Args.Value()
	var notes []string
	for _, ap := range r.args {
		ok := ap.matchAny(args)
		how := "some value matches"
		if r.info.Effect == Allow {
			ok, how = ap.matchEvery(args), "every value matches"
		}
		if !ok {
			how = "no match"
			if r.info.Effect == Allow {
				how = "not every value matches (or there is none, or one has a .. segment)"
			}
		}
		notes = append(notes, fmt.Sprintf("%s: %s", ap.explain(args), how))
		if !ok {
			c.Note = strings.Join(notes, "; ")
			return c
		}
	}
	if r.when == nil {
		c.Matched = true
		if len(notes) == 0 {
			notes = append(notes, "no args or when: the tool name decides")
		}
		c.Note = strings.Join(notes, "; ")
		return c
	}
	ok, err := r.when.eval(e.activation())
	switch {
	case err != nil:
		c.Matched = r.info.Effect != Allow
		treated := "treated as matching (fail closed)"
		if !c.Matched {
			treated = "treated as not matching (fail closed)"
		}
		notes = append(notes, fmt.Sprintf("when %q failed: %v: %s", r.info.When, err, treated))
	default:
		c.Matched = ok
		notes = append(notes, fmt.Sprintf("when %q is %t", r.info.When, ok))
	}
	c.Note = strings.Join(notes, "; ")
	return c
}

// String renders the explanation for a terminal.
func (x *Explanation) String() string {
	var b strings.Builder
	d := &x.Decision
	fmt.Fprintf(&b, "outcome: %s\n", d.Outcome)
	if d.Version != "" {
		fmt.Fprintf(&b, "policy:  %s\n", d.Version)
	}
	fmt.Fprintf(&b, "call:    %s by %s\n", x.Tool, describeCaller(x.Caller))
	fmt.Fprintf(&b, "because: %s\n", x.because())
	if len(x.Layers) > 0 {
		fmt.Fprintf(&b, "layers:  %s\n", strings.Join(x.Layers, ", "))
	}
	if len(x.Considered) > 0 {
		b.WriteString("rules naming the tool:\n")
		for _, c := range x.Considered {
			mark := "no match"
			if c.Matched {
				mark = "match"
			}
			fmt.Fprintf(&b, "  %-8s %-5s %s (line %d): %s\n", mark, c.Rule.Effect, c.Rule.Name(), c.Rule.Line, c.Note)
		}
	}
	if x.Others > 0 {
		fmt.Fprintf(&b, "other rules: %d (they do not name the tool)\n", x.Others)
	}
	if d.ApprovalError != "" {
		fmt.Fprintf(&b, "approval not used: %s\n", d.ApprovalError)
	}
	return b.String()
}

// because says in one line what decided.
func (x *Explanation) because() string {
	d := &x.Decision
	var s string
	if r := d.Rule(); r != nil {
		s = fmt.Sprintf("%s (line %d)", r.Name(), r.Line)
		if r.Reason != "" {
			s += ": " + r.Reason
		}
		if r.Err != "" {
			s += " [condition failed: " + r.Err + "]"
		}
	} else {
		s = d.Reason()
	}
	if d.RequiresApproval && d.decided() == Ask && d.Rule() != nil {
		s += "; the tool also requires approval"
	}
	switch {
	case d.Approval != nil:
		s += fmt.Sprintf("; covered by approval %s", d.Approval.ID)
		if d.Approval.Approver != "" {
			s += " of " + d.Approval.Approver
		}
	case d.Grant != nil:
		g := d.Grant
		s += fmt.Sprintf("; covered by %s grant %s (tool %q", g.Layer, g.ID, g.Tool)
		if !g.Expires.IsZero() {
			s += ", until " + g.Expires.UTC().Format(time.RFC3339)
		}
		s += ")"
	}
	return s
}

func describeCaller(c *toolwirev1.Caller) string {
	var parts []string
	for _, kv := range [...][2]string{
		{"tenant", c.GetTenant()}, {"agent", c.GetAgent()}, {"session", c.GetSession()},
	} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	if len(parts) == 0 {
		return "an anonymous caller"
	}
	return strings.Join(parts, ", ")
}
