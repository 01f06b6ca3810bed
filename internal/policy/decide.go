package policy

import (
	"fmt"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Input is what Decide decides about: one call, after identity, lookup,
// scopes, limits and schema validation.
type Input struct {
	// Tool is the tool's spec at the version called (name, version,
	// category, annotations, requires_approval). Required.
	Tool *toolwirev1.ToolSpec
	// Args are the call's arguments, parsed once (ParseArgs); nil = {}.
	Args *Args
	// Caller is who calls (tenant, agent and scopes from the credentials,
	// session and the rest from the request); nil = an empty caller.
	Caller *toolwirev1.Caller
	// Grants are the standing grants that may cover an ask; nil = none.
	// Read only when the outcome would otherwise be ask.
	Grants GrantSource
	// Approval is the approval record the call presents (found by its id
	// or read from a verified token); nil = none. Used only when the
	// outcome would otherwise be ask, and only if Check passes.
	Approval *Approval
	// Now is the time grants and approvals are checked at; zero = now.
	Now time.Time
	// CallID is the call's id ("" when there is none, as in the
	// policy's own tests): a limit keyed by chain counts a call at the
	// top of its delegation chain under it (Limit.KeyOf).
	CallID string
}

// Decision is the answer to one call, with what it rests on.
type Decision struct {
	// Outcome is Allow, Ask or Deny.
	Outcome Effect
	// Version is the version of the policy decided by; "" without one.
	Version string
	// Matched are the rules that matched, by layer (tenant first), then
	// effect (deny, ask, allow), then id. When a deny rule matched they
	// are the deny rules only: nothing else can change the outcome.
	Matched []Match
	// Default is the layer whose default gave the outcome (the ask
	// outcome, when a grant or approval then covered it), 0 when no
	// default did: a layer's default applies when none of its rules
	// matched.
	Default Layer
	// DefaultMode is the mode whose layer's default gave the outcome, when
	// Default is LayerMode.
	DefaultMode string
	// RequiresApproval: the tool's spec requires approval, which asks
	// whatever the rules say (deny still wins).
	RequiresApproval bool
	// Grant or Approval covered an ask, which made the outcome Allow;
	// both nil otherwise.
	Grant    *Grant
	Approval *Approval
	// ApprovalError says why Input.Approval did not cover the call, ""
	// when it did or none was given.
	ApprovalError string
	// Errors are the rules whose condition could not be evaluated (cost
	// limit, runtime error): a deny or ask rule counted as matching (and
	// is in Matched too), an allow rule as not matching.
	Errors []Match
}

// Match is a rule that matched (or failed to evaluate) in a decision.
type Match struct {
	*RuleInfo
	// Err says why the rule's condition could not be evaluated; "" when
	// it was.
	Err string
}

// Covered reports whether a grant or an approval turned an ask into the
// Allow outcome.
func (d *Decision) Covered() bool { return d.Grant != nil || d.Approval != nil }

// decided is the effect the rules, defaults and spec gave, before a
// grant or approval covered it.
func (d *Decision) decided() Effect {
	if d.Covered() {
		return Ask
	}
	return d.Outcome
}

// Rule returns the rule that decided: the first of Matched whose effect
// is the outcome (Ask when a grant or approval covered it); nil when a
// default, requires_approval or the absence of rules decided.
func (d *Decision) Rule() *Match {
	want := d.decided()
	for i := range d.Matched {
		if d.Matched[i].Effect == want {
			return &d.Matched[i]
		}
	}
	return nil
}

// RuleID returns the id of Rule, "" when there is none: with Version, what
// an audit record keeps of a decision.
func (d *Decision) RuleID() string {
	if r := d.Rule(); r != nil {
		return r.ID
	}
	return ""
}

// ModeRestricted reports whether the session's mode is what denied the
// call: the deciding deny rule is a mode layer's, or no rule decided and
// the mode layer's default did (a tenant or agent deny, which wins first,
// is not the mode's). It returns the mode and the rule id ("" for the
// default).
func (d *Decision) ModeRestricted() (mode, rule string, ok bool) {
	if d.Outcome != Deny {
		return "", "", false
	}
	if r := d.Rule(); r != nil {
		return r.Agent, r.ID, r.Layer == LayerMode
	}
	return d.DefaultMode, "", d.Default == LayerMode
}

// Reason returns what a refused or asked caller may be told: the deciding
// rule's reason (or, when it has none, its id), never a rule's text.
func (d *Decision) Reason() string {
	if r := d.Rule(); r != nil {
		if r.Reason != "" {
			return r.Reason
		}
		switch r.Effect {
		case Deny:
			return fmt.Sprintf("denied by policy rule %q", r.ID)
		case Ask:
			return fmt.Sprintf("policy rule %q asks for approval", r.ID)
		}
		return fmt.Sprintf("allowed by policy rule %q", r.ID)
	}
	switch eff := d.decided(); {
	case eff == Ask && d.RequiresApproval:
		return "the tool requires approval"
	case eff == Deny && d.Default == LayerMode:
		return fmt.Sprintf("not allowed in mode %s (its default is deny)", d.DefaultMode)
	case eff == Deny && d.Default != 0:
		return fmt.Sprintf("not allowed by the %s policy (its default is deny)", d.Default)
	case eff == Ask && d.Default != 0:
		return fmt.Sprintf("the %s policy asks for approval of calls no rule allows", d.Default)
	case d.Version == "":
		return "no policy is in force"
	}
	return "no rule refused the call"
}

// Decide decides whether a call may run (DESIGN §6):
//
//  1. deny wins: a matching deny rule in any applicable layer (the tenant
//     layer and the caller's agent layer) denies;
//  2. each layer then says ask (a matching ask rule), allow (a matching
//     allow rule) or, when none of its rules matched, its default; the
//     most restrictive layer wins, so a layer whose default is deny
//     denies every call none of its own rules names: an agent layer can
//     narrow what the tenant layer allows, never widen it;
//  3. a tool whose spec requires approval asks, whatever the rules say;
//  4. an ask becomes allow when Input.Approval checks out for this exact
//     call or a grant from Input.Grants covers it;
//  5. nothing said otherwise: allow.
//
// The outcome and the whole Decision do not depend on the order of rules
// in the document or of the grants. A nil Policy decides 3, 4 and 5 only.
// Decide does not mark an approval used: when Decision.Approval is set,
// the caller must consume its nonce before publishing the call.
func (p *Policy) Decide(in Input) Decision {
	var d Decision
	if p == nil {
		if in.Tool.GetRequiresApproval() {
			d.RequiresApproval = true
			d.Outcome = Ask
			cover(&in, &d)
			return d
		}
		d.Outcome = Allow
		return d
	}
	d.Version = p.version
	name := in.Tool.GetName()
	layers := p.layersFor(in.Caller)
	var cands [len(layers)]*candidates
	e := evaluator{in: in}

	for i, l := range layers {
		if l == nil {
			continue
		}
		cands[i] = l.candidatesFor(name)
		for _, r := range cands[i].by[Deny] {
			e.apply(&d, r)
		}
	}
	if len(d.Matched) > 0 {
		d.Outcome = Deny
		return d
	}

	var outcome Effect
	var byDefault [len(layers)]Effect
	for i, l := range layers {
		if l == nil {
			continue
		}
		var v Effect
		for _, r := range cands[i].by[Ask] {
			if e.apply(&d, r) {
				v = Ask
			}
		}
		if v == 0 {
			for _, r := range cands[i].by[Allow] {
				if e.apply(&d, r) {
					v = Allow
				}
			}
		}
		if v == 0 && l.def != 0 {
			v, byDefault[i] = l.def, l.def
		}
		outcome = max(outcome, v)
	}
	if in.Tool.GetRequiresApproval() {
		d.RequiresApproval = true
		outcome = max(outcome, Ask)
	}
	if outcome == 0 {
		outcome = Allow
	}
	d.Outcome = outcome
	for i, l := range layers {
		if l != nil && byDefault[i] == outcome {
			d.Default = l.kind
			if l.kind == LayerMode {
				d.DefaultMode = l.agent
			}
			break
		}
	}
	if outcome == Ask {
		cover(&in, &d)
	}
	return d
}

// cover turns an ask into an allow when the approval or a grant covers
// the call.
func cover(in *Input, d *Decision) {
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	if a := in.Approval; a != nil {
		if err := a.Check(in.Tool, in.Caller, in.Args, now); err != nil {
			d.ApprovalError = err.Error()
		} else {
			c := *a
			d.Approval, d.Outcome = &c, Allow
			return
		}
	}
	if in.Grants != nil {
		if g := coveringGrant(in.Grants.Grants(in.Caller, in.Tool.GetName()), in.Tool, in.Caller, in.Args, now); g != nil {
			d.Grant, d.Outcome = g, Allow
		}
	}
}

// evaluator evaluates rules for one decision; the CEL activation is made
// on the first condition evaluated. It holds a copy of the Input, so
// that the Input stays on the caller's stack.
type evaluator struct {
	in  Input
	act *activation
}

// apply evaluates r (whose tools globs match) and records it in d: a
// match in Matched, a failed condition in Errors. It returns whether r
// counts as matching.
func (e *evaluator) apply(d *Decision, r *rule) bool {
	ok, err := e.eval(r)
	if err != nil {
		d.Errors = append(d.Errors, Match{RuleInfo: &r.info, Err: err.Error()})
	}
	if ok {
		m := Match{RuleInfo: &r.info}
		if err != nil {
			m.Err = err.Error()
		}
		d.Matched = append(d.Matched, m)
	}
	return ok
}

// eval reports whether r matches the call. A condition that cannot be
// evaluated makes a deny or ask rule match and an allow rule not match
// (fail closed); the error is returned with that answer.
func (e *evaluator) eval(r *rule) (bool, error) {
	if !e.argsMatch(r) {
		return false, nil
	}
	if r.when == nil {
		return true, nil
	}
	ok, err := r.when.eval(e.activation())
	if err != nil {
		return r.info.Effect != Allow, err
	}
	return ok, nil
}

func (e *evaluator) argsMatch(r *rule) bool {
	if len(r.args) == 0 {
		return true
	}
	args := e.in.Args.Value()
	for _, ap := range r.args {
		if r.info.Effect == Allow {
			if !ap.matchEvery(args) {
				return false
			}
		} else if !ap.matchAny(args) {
			return false
		}
	}
	return true
}

func (e *evaluator) activation() *activation {
	if e.act == nil {
		e.act = newActivation(&e.in)
	}
	return e.act
}

// Hidden reports whether ListTools should hide the tool from caller: an
// applicable layer denies every call of it whatever the arguments — a
// deny rule with neither args nor when names it, or the layer's default
// is deny and none of its rules names it. A nil Policy hides nothing.
func (p *Policy) Hidden(tool string, caller *toolwirev1.Caller) bool {
	if p == nil {
		return false
	}
	for _, l := range p.layersFor(caller) {
		if l == nil {
			continue
		}
		c := l.candidatesFor(tool)
		for _, r := range c.by[Deny] {
			if r.unconditional() {
				return true
			}
		}
		if l.def == Deny && c.n == 0 {
			return true
		}
	}
	return false
}
