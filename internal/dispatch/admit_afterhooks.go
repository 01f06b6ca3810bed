package dispatch

import "context"

// afterHookStep names in the call the after-hooks the policy in force
// binds to its tool (internal/hooks): the worker sends its response to
// them, and the audit shows which looked at it.
func (a *admission) afterHookStep(ctx context.Context) verdict {
	d := a.d
	d.hooks.BindAfter(ctx, a.id.Tenant, a.call)
	return next
}
