package dispatch

import "context"

// beforeHookStep runs the before-hooks that cover the call (beforeHooks):
// a hook may refuse it, ask (left for the policy step: a deny of the
// policy still wins), allow it past the other hooks, or rewrite its
// arguments (validated again).
func (a *admission) beforeHookStep(ctx context.Context) verdict {
	d := a.d
	te, pd, ask := d.beforeHooks(ctx, a.id, a.spec, a.call)
	if te != nil {
		return a.refused(te, pd)
	}
	a.parsed = nil // a rewrite changed the arguments
	a.hookAsk = ask
	return next
}
