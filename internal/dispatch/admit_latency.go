package dispatch

import "context"

// latencyStep resolves the soft latency budget of the call (the
// tightest of its spec's and the policy's entries that apply, in the
// call's session mode: an entry naming a mode applies to the calls of
// sessions in that mode only) and watches the call before it is
// published: its result may come before the publish returns. It never
// stops a call.
func (a *admission) latencyStep(_ context.Context) verdict {
	d := a.d
	b, ok := d.policyFor(a.id.Tenant).LatencyBudgetFor(a.spec, a.call.Caller.GetMode())
	if !ok {
		return next
	}
	a.call.LatencyBudget = callLatencyBudget(b) // its readers measure its result against it
	if old := d.latency.add(a.callID, watchedCall{tenant: a.id.Tenant, tool: a.spec.GetName(), accepted: a.call.GetAcceptedAt().AsTime(), budget: b}); old != "" {
		d.log.Debug("latency budget of the oldest watched call forgotten: too many calls watched", "call_id", old)
	}
	return next
}
