package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// loopGuardID names the loop guard in decision records and as the
// limits store's key.
const loopGuardID = "loop-guard"

// loopGuardChainID is the loop guard's key space for delegation chains
// (scope chain): apart from the sessions', so that no session shares a
// chain's count.
const loopGuardChainID = "loop-guard.chain"

// loopGuardStep is the loop-guard step of admission (DESIGN §6: after the
// policy and approval, before the limits), for a call the policy allowed:
// it counts the call's run — the same tool and canonical arguments in a
// row in its session (or run) — in the shared limits bucket, and from the
// document's thresholds warns (the call runs with loop_count set, which
// its response's meta and its ACCEPTED record carry), asks (the call is
// parked for an approver) or denies. A call without a session (run) is not
// guarded. When the count cannot be read (the limits bucket unreachable)
// the guard lets the call through and logs it: it is a safety net
// against runaway agents, and the limits, which must hold, fail closed on
// their own.
func (a *admission) loopGuardStep(ctx context.Context) verdict {
	if a.ask != nil {
		return next // asked already: an approver decides
	}
	if te := a.loopGuard(ctx); te != nil {
		return a.refused(te, a.pd)
	}
	return next
}

// loopGuard counts the call's run and applies the thresholds: it returns
// the refusal of a denied call; an ask is left in a.ask, the decision in
// a.pd.
func (a *admission) loopGuard(ctx context.Context) *toolwirev1.ToolError {
	d := a.d
	spec, call, pd := a.spec, a.call, a.pd
	p := d.policyFor(call.GetCaller().GetTenant())
	g := p.LoopGuard()
	if g == nil || !g.Guards(call.Tool) || isHookCall(ctx) {
		return nil
	}
	scope, in, space := call.GetCaller().GetSession(), "session", loopGuardID
	switch root := call.GetCaller().GetRootCallId(); {
	case g.Scope == "run":
		scope, in = call.GetCaller().GetRun(), "run"
	case g.Scope == "chain" && root != "":
		// The root's id: one count per chain, in a key space of its own
		// (a session may be named anything, its root's id too).
		scope, in, space = root, "delegation chain", loopGuardChainID
	}
	store := d.limitGate.Store()
	if scope == "" || store == nil {
		return nil
	}
	args, err := a.policyArgs()
	if err != nil {
		return registry.Violation("", err.Error())
	}
	var fields *policy.LoopFields // nil: every member compared
	if a.entry != nil {
		fields = a.entry.Loop
	}
	fp := fields.Fingerprint(call.Tool, args)
	if r := roundDigest(call.Input); r != "" {
		// A call that answers a tool's request for input is the next step
		// of an exchange, not a repeat of the call that asked; answering
		// the same round again is.
		sum := sha256.Sum256([]byte(fp + "\x00" + r))
		fp = hex.EncodeToString(sum[:])
	}
	run, err := store.Repeat(ctx, limits.Key{Tenant: call.GetCaller().GetTenant(), Limit: space, Value: scope}, fp, g.Window,
		call.AcceptedAt.AsTime())
	if err != nil {
		d.log.WarnContext(ctx, "the loop guard could not count a call; it runs unguarded", "call_id", call.CallId, "err", err)
		return nil
	}
	n := run.Count
	what := fmt.Sprintf("the same call of %q with the same arguments %d times in a row in this %s", call.Tool, n, in)
	if run.Period > 1 {
		what = fmt.Sprintf("the same cycle of %d calls, ending with %q, %d times in a row in this %s", run.Period, call.Tool, n, in)
	}
	guarded := func(outcome toolwirev1.PolicyOutcome) *toolwirev1.PolicyDecision {
		out := &toolwirev1.PolicyDecision{Outcome: outcome, Version: p.Version(), RuleId: loopGuardID, Reason: "loop guard: " + what}
		if pd != nil {
			out.RequiresApproval = pd.RequiresApproval
		}
		return out
	}
	switch {
	case g.Deny > 0 && n >= g.Deny:
		a.pd = guarded(toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY)
		return loopDenied(what)
	case g.Ask > 0 && n >= g.Ask:
		a.pd = guarded(toolwirev1.PolicyOutcome_POLICY_OUTCOME_ASK)
		call.PolicyVersion, call.PolicyRule, call.ApprovalId, call.GrantId = a.pd.Version, a.pd.RuleId, "", ""
		a.ask = &asked{pd: a.pd, spec: spec, args: args, reason: "loop guard: " + what + "; an approver must agree to it running again"}
	case g.Warn > 0 && n >= g.Warn:
		call.LoopCount = int32(n)
	}
	return nil
}

// loopDenied is the answer to a call the loop guard denies.
func loopDenied(what string) *toolwirev1.ToolError {
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		Message:            "loop guard: " + what + "; it is not run again",
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	te.Suggestion = "stop repeating this call: its answer will not change; try something else, or pause (a pause longer than the guard's window starts over)"
	return te
}
