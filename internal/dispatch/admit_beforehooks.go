package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/policy"
)

// beforeHookStep runs the before-hooks that cover the call (beforeHooks):
// a hook may refuse it, ask (left for the policy step: a deny of the
// policy still wins), allow it past the other hooks, or rewrite its
// arguments (validated again). A call the rules deny as it stands never
// reaches a hook (deniedBeforeHooks): its arguments do not leave for a
// hook's endpoint, and its answer is the rule's.
func (a *admission) beforeHookStep(ctx context.Context) verdict {
	d := a.d
	if v, denied := a.deniedBeforeHooks(ctx); denied {
		return v
	}
	sent := a.call.Arguments
	te, pd, ask := d.beforeHooks(ctx, a.id, a.spec, a.call)
	if te != nil {
		return a.refused(te, pd)
	}
	if !sameSlice(sent, a.call.Arguments) {
		a.doc, a.parsed = nil, nil // a hook rewrote them
	}
	a.hookAsk = ask
	return next
}

// deniedBeforeHooks asks the rules about the call as it stands when a
// before-hook covers it: a deny is the answer at once (deny wins, and no
// hook could turn it into an allow). Only a deny decides here; an ask or
// an allow is decided again by the policy step, on the arguments the
// hooks leave. A call no hook covers costs nothing more.
func (a *admission) deniedBeforeHooks(ctx context.Context) (verdict, bool) {
	if isHookCall(ctx) || len(a.d.policyFor(a.id.Tenant).BeforeHooks(a.call.Tool)) == 0 {
		return next, false
	}
	dec, te := a.decide(nil)
	if te != nil || dec.Outcome != policy.Deny {
		return next, false // the policy step answers it
	}
	a.pd = DecisionRecord(&dec)
	return a.refused(denied(a.spec.Name, &dec), a.pd), true
}

// sameSlice reports whether x and y are the same bytes in memory (not
// merely equal ones).
func sameSlice(x, y []byte) bool {
	return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
}
