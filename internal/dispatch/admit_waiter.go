package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
)

// waiterStep gives a caller waiting in Call its place among this
// replica's waiters (waiters.go), before the call can be published: a fast
// call's result may arrive before the publish returns. A parked call is
// waited on only when the caller asked to wait for the approval;
// otherwise it is answered at once. A replica with Config.MaxWaiting
// callers waiting refuses the call OVERLOADED (recorded like every
// refusal: any replica answers the id).
func (a *admission) waiterStep(_ context.Context) verdict {
	d := a.d
	if a.ask != nil && a.ask.token != nil {
		// A token's call takes the id of the parked call it approves from
		// here on (redeem records a refusal under the one admission minted).
		a.ask.minted, a.callID = a.callID, a.ask.token.ID
		a.call.CallId = a.callID
	}
	parked := a.ask != nil && a.ask.token == nil
	if !a.waiting || (parked && !a.req.WaitForApproval) {
		return next
	}
	w, err := d.wait(a.id.Tenant, a.call.GetTool(), a.callID)
	switch {
	case errors.Is(err, errOverloaded):
		return a.refused(envelope.Overloaded(fmt.Sprintf("this dispatcher already has %d callers waiting", d.cfg.MaxWaiting), time.Second), nil)
	case err != nil:
		return a.answered(nil, nil, err)
	}
	a.w = w
	return next
}
