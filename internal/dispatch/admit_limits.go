package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/limitgate"
)

// limitStep is the limits and budgets step (internal/limitgate), the last before
// the publish, so that a call refused earlier spends nothing: the call
// takes its rates, budget units and concurrency slots, or is refused
// RATE_LIMIT or BUDGET_EXCEEDED with retry_after.
func (a *admission) limitStep(ctx context.Context) verdict {
	return a.limitsFor(ctx, true)
}

// limitsFor takes the call's limits, its concurrency slots only when
// slots is set (an asked call holds none while it waits). A hook's own
// call is not counted.
func (a *admission) limitsFor(ctx context.Context, slots bool) verdict {
	d := a.d
	if isHookCall(ctx) {
		return next
	}
	t, refused := d.limitGate.Take(ctx, limitgate.Call{Call: a.call, Allowed: a.pd, Now: a.now, Slots: slots, Args: a.parsed})
	if refused != nil {
		return a.refused(refused.Error, refused.Decision)
	}
	a.ticket = t
	return next
}
