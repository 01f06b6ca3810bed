package dispatch

import "context"

// beforeHookStep runs the before-hooks that cover the call (beforeHooks):
// a hook may refuse it, ask (left for the policy step: a deny of the
// policy still wins), allow it past the other hooks, or rewrite its
// arguments (validated again).
func (a *admission) beforeHookStep(ctx context.Context) verdict {
	d := a.d
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

// sameSlice reports whether x and y are the same bytes in memory (not
// merely equal ones).
func sameSlice(x, y []byte) bool {
	return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
}
