package dispatch

import "context"

// afterHookStep names in the call the after-hooks the policy in force
// binds to its tool (bindAfterHooks): the worker sends its response to
// them, and the audit shows which looked at it.
func (d *Dispatcher) afterHookStep(ctx context.Context, a *admission) verdict {
	d.bindAfterHooks(ctx, a.id, a.call)
	return next
}
