package dispatch

import "context"

// limitStep is the limits and budgets step (limits.go), the last before
// the publish, so that a call refused earlier spends nothing: the call
// takes its rates, budget units and concurrency slots, or is refused
// RATE_LIMIT or BUDGET_EXCEEDED with retry_after.
func (d *Dispatcher) limitStep(ctx context.Context, a *admission) verdict {
	return d.limitsFor(ctx, a, true)
}

// limitsFor takes the call's limits, its concurrency slots only when
// slots is set (an asked call holds none while it waits).
func (d *Dispatcher) limitsFor(ctx context.Context, a *admission, slots bool) verdict {
	t, te, pd := d.takeLimits(ctx, a.call, a.pd, a.now, slots)
	if te != nil {
		return a.refused(te, pd)
	}
	a.ticket = t
	return next
}
