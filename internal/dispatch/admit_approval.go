package dispatch

import "context"

// approval is the step that sends an asked call off to settle: an ask is
// parked for an approver (parkCall), and a call an approval token covers
// publishes the parked call it approves (redeem, approve.go). Every other
// call goes on to be published.
func (a *admission) approval(_ context.Context) verdict {
	switch {
	case a.ask == nil:
		return next
	case a.ask.token != nil:
		return redeem
	}
	return park
}

// parkCall parks an asked call (park, approve.go). An ask is counted
// against its limits when it is parked (its rates and budgets; no slot
// while it waits): a refusal parks nothing, and a call that could not be
// parked gets back what it spent.
func (a *admission) parkCall(ctx context.Context) (*Submitted, *waiter, error) {
	d := a.d
	if a.limitsFor(ctx, false) == refuse {
		return a.refuseCall(ctx), nil, nil
	}
	s, w, err := a.park(ctx)
	if s != nil && s.Rejected != nil {
		d.limitGate.GiveBack(context.WithoutCancel(ctx), a.ticket)
	}
	return s, w, err
}
