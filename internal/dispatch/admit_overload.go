package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/poolview"
)

// overload is the step that refuses, OVERLOADED with retry_after, a call
// its pool could not start in time or a store could not take (poolview.Load
// keeps the view of the pools and stores), or any call while the archive
// is so far behind that a stream would drop what it has not archived
// (archiveLag.refusal: the one refusal
// for storage in steady state). It comes after the
// idempotency key, so that a repeat of an accepted call still answers
// that call. Unlike other refusals an overload refusal is not recorded as
// a REJECTED event: under overload most calls are refused, and a stored
// message per refusal (about 3,400 a second in toolwire-bench -overload)
// would grow the server's memory with every refused call id and fill the
// events store. The caller has the answer; the refusal is counted in the
// metrics; the call id, never queued, is UNKNOWN to GetResult once it is
// no longer recent (10s). A call with an idempotency key was asked about
// before its key was claimed (admission.beforeClaim, poolview.Load.Peek),
// so that its refusal too is not recorded and claims nothing; the check
// here, which counts the call, can still refuse it (calls admitted in
// between): that refusal is recorded, since a retry with the same key may
// be waiting on its call id, and the key released.
func (a *admission) overload(ctx context.Context) verdict {
	d := a.d
	if te, cause, target := d.lag.refusal(ctx); te != nil {
		a.overloaded, a.target = cause, target
		return a.refused(te, nil)
	}
	pool, te, cause, target := d.load.Check(ctx, a.loadRequest())
	if te != nil {
		a.overloaded, a.target = cause, target
		return a.refused(te, nil)
	}
	a.admitted = pool
	return next
}

// loadRequest is what the pools' and stores' view needs to know of the
// call (poolview.Request); it sets a.subject.
func (a *admission) loadRequest() poolview.Request {
	if a.subject == "" {
		a.subject = a.d.subj.Call(a.call.Executor, a.id.Tenant, a.call.Provider, a.call.Tool)
	}
	return poolview.Request{Subject: a.subject, Keyed: a.req.IdempotencyKey != "", ScheduleToStart: poolview.ScheduleToStart(a.call, a.now)}
}
