package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// checkPolicy is the policy step, the last before the attempts (after
// gate: a redelivery that has its result, or whose earlier attempt's
// outcome is unknown, is answered as such first): deny wins at every
// moment, also over a person's decision taken under an older policy. A
// call that carries an approval or a grant — admitted, or approved,
// under the policy in force then — runs only if the policy in force now,
// read from the policies bucket's leader (policystore.Reader), does not
// deny it; otherwise it is refused PERMISSION_DENIED, naming the rule
// (answered, with what an earlier attempt may have done; dead-lettered;
// terminated), never run. Only the deny decision is taken: no ask, no
// limit, no hook (those are admission's, and were taken). A policy that
// cannot be read or loaded is read again while the delivery holds the
// call (persist), never run unchecked. Other calls cost nothing here.
// The check is made again before every retry run in process (attempts):
// a deny applied during the backoff stops the next attempt; last is the
// failed attempt's error then (its side effects go with the refusal),
// nil before the first.
func (d *delivery) checkPolicy(last *toolwirev1.ToolError) outcome {
	call, spec := d.call, d.spec
	if call.ApprovalId == "" && call.GrantId == "" {
		return outcome{}
	}
	var why string
	var denied bool
	err := d.persist("policy lookup", d.lookup(func(ctx context.Context) error {
		p, err := d.w.policies.For(ctx, call.GetCaller().GetTenant())
		if err != nil {
			return err
		}
		why, denied = policyDenies(p, spec, call)
		return nil
	}))
	switch {
	case err != nil:
		return d.heldOutcome(err)
	case denied:
		d.w.stats.policyRefusals.Add(1)
		d.log().Info("the policy in force denies a call that carries an approval or a grant; not running it", "why", why)
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("the worker's policy check refused this call of %q: the policy in force denies it: %s", call.Tool, why))
		te.PartialSideEffects = sideEffectsOf(d.prev)
		if se := last.GetPartialSideEffects(); se != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED {
			te.PartialSideEffects = max(te.PartialSideEffects, se)
		}
		te.Suggestion = "do not retry this call as it is: the policy changed after it was approved or granted; an administrator can explain the decision with `toolctl policy explain`"
		return refusal(te)
	}
	return outcome{}
}

// policyDenies decides whether p, the policy in force, denies call of
// spec, as the dispatcher's re-check on approve does (a deny rule, or a
// layer whose default is deny); without the call's approval or grant,
// since none turns a deny into an allow. It says why: the deciding
// rule's reason (never its text), the policy version and the rule's id.
// Arguments that cannot be read canonically cannot be decided: denied.
func policyDenies(p *policy.Policy, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) (string, bool) {
	if p == nil {
		return "", false
	}
	args, err := policy.ParseArgs(call.GetArguments())
	if err != nil {
		return fmt.Sprintf("its arguments cannot be read canonically to decide it (policy version %s)", p.Version()), true
	}
	dec := p.Decide(policy.Input{Tool: spec, Args: args, Caller: call.GetCaller(), Now: time.Now()})
	if dec.Outcome != policy.Deny {
		return "", false
	}
	rule := dec.RuleID()
	if rule == "" {
		rule = "the default"
	}
	return fmt.Sprintf("%s (policy version %s, rule %s)", dec.Reason(), dec.Version, rule), true
}
