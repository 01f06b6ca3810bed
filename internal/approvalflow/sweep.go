package approvalflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/approvals"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The sweep: every replica, every Config.Sweep, acts on the records its
// tracker (approvals.Tracker, fed by the headers of every record write)
// says are due:
//
//   - a pending record past its expiry is expired (one compare-and-set:
//     of the replicas sweeping, one wins), answered EXPIRED and recorded
//     APPROVAL_EXPIRED;
//   - a pending record whose call the policy in force denies is denied
//     and answered (recheckParked: deny wins at every moment), once per
//     change of its tenant's policy;
//   - a decided record not published publishGrace after its decision
//     (the replica that decided stopped before finishing it, or its
//     publish failed) is finished: an approved call published under its
//     id as message id (the calls stream stores it once within its
//     duplicate window), a denied or expired one answered.
//
// An approved record whose decision is older than the calls stream's
// duplicate window, less a margin (republishWithin), is not published
// again: a first publish that reached the stream but was never marked
// could no longer be told from none, so the call is answered
// UNKNOWN_OUTCOME instead of perhaps running twice. It takes every
// replica being down for that long (10 minutes by default) right after an
// approval.

const (
	// publishGrace is how long the replica that decided has to finish
	// before the sweep does it too (both publishing is harmless: the
	// message id).
	publishGrace = 5 * time.Second
	// windowMargin keeps the sweep's last publish of an approved call
	// well inside the calls stream's duplicate window.
	windowMargin = time.Minute
	// sweepBudget bounds the records one sweep acts on.
	sweepBudget = 500
)

// republishWithin is how long after its decision the sweep still
// publishes an approved call: the calls stream's duplicate window less a
// margin (windowMargin, at most half the window).
func republishWithin(window time.Duration) time.Duration {
	return window - min(windowMargin, window/2)
}

// sweep acts on every due record, each within Config.FinishTimeout, and
// decides the parked calls of every tenant whose policy changed again
// (recheckParked).
func (f *Flow) sweep(ctx context.Context) {
	f.recheckParked(ctx)
	for _, s := range f.tracker.Due(time.Now(), publishGrace, sweepBudget) {
		actx, cancel := context.WithTimeout(ctx, f.cfg.FinishTimeout)
		err := f.sweepOne(actx, s)
		cancel()
		if err != nil && ctx.Err() == nil {
			f.log.Warn("approval sweep: acting on a record failed; trying again at the next sweep", "call_id", s.ID, "tenant", s.Tenant, "err", err)
		}
	}
}

// sweepOne expires or finishes the record s summarises, after reading it
// again (the summary may be stale).
func (f *Flow) sweepOne(ctx context.Context, s approvals.Summary) error {
	rec, err := f.reread(ctx, s)
	if rec == nil {
		return err
	}
	now := time.Now()
	switch {
	case !rec.Decided():
		if now.Before(rec.Approval.GetExpiresAt().AsTime()) {
			f.tracker.Note(rec)
			return nil
		}
		decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_EXPIRED,
			approvalBy{reason: fmt.Sprintf("no approver decided within %s", f.cfg.TTL), at: now})
		if err := f.store.Update(ctx, rec); err != nil {
			if errors.Is(err, approvals.ErrConflict) {
				return nil // another replica (or an approver) decided it
			}
			return err
		}
		f.tracker.Note(rec)
		return f.finishDecided(ctx, rec)
	case rec.Published:
		f.tracker.Note(rec)
		return nil
	case rec.Approval.GetState() != toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED:
		return f.finishDecided(ctx, rec)
	case now.Sub(rec.Approval.GetDecidedAt().AsTime()) < republishWithin(f.duplicateWindow):
		f.log.Info("approval sweep: publishing an approved call its approver left unpublished", "call_id", rec.ID())
		return f.finishApproved(ctx, rec)
	}
	f.log.Warn("approval sweep: an approved call was left unpublished past the calls stream's duplicate window; answering UNKNOWN_OUTCOME", "call_id", rec.ID())
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME,
		Message: "the call was approved, but no dispatcher confirmed its publish within the calls stream's duplicate window: " +
			"it may or may not have run", PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
		Suggestion: "check the tool's target for the effect before calling again"}
	return f.answerRecord(ctx, rec, te)
}

// recheckParked decides the parked calls of each tenant whose policy
// version changed since this replica last looked (Core.Denies): those the
// policy in force denies now are denied and answered, and leave the
// approvers' inbox. A sweep looks at most recheckBudget records, shared
// by the tenants that need it, each resuming after the last record it
// looked at (its cursor), oldest first: a tenant with many parked calls
// takes several sweeps and starves no other. A tenant is marked checked
// at a version once every record was looked at; a failure starts it
// again at the next sweep. The marks are the sweep goroutine's own.
func (f *Flow) recheckParked(ctx context.Context) {
	pending := f.tracker.Pending()
	for tenant := range f.checked {
		if _, ok := pending[tenant]; !ok {
			delete(f.checked, tenant) // nothing parked: look again when there is
		}
	}
	var todo []string
	for tenant := range pending {
		if m, ok := f.checked[tenant]; !ok || m.version != f.core.PolicyVersion(tenant) || m.after != "" {
			todo = append(todo, tenant)
		}
	}
	if len(todo) == 0 {
		return
	}
	share := max(recheckBudget/len(todo), 1)
	for _, tenant := range todo {
		f.recheckTenant(ctx, tenant, pending[tenant], share)
	}
}

// recheckBudget bounds the records one sweep decides again.
const recheckBudget = 200

// recheckMark is how far a tenant's parked calls were decided again:
// every one under version when after is "", else those up to after.
type recheckMark struct{ version, after string }

// recheckTenant decides again at most n of tenant's parked calls sums
// (oldest first), from its cursor on.
func (f *Flow) recheckTenant(ctx context.Context, tenant string, sums []approvals.Summary, n int) {
	version := f.core.PolicyVersion(tenant)
	m := f.checked[tenant]
	if m.version != version {
		m = recheckMark{version: version} // a new version: from the start
	}
	for _, s := range sums {
		if m.after != "" && s.ID <= m.after {
			continue
		}
		if n == 0 {
			f.checked[tenant] = m
			return
		}
		n--
		actx, cancel := context.WithTimeout(ctx, f.cfg.FinishTimeout)
		err := f.recheckOne(actx, s)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("approval sweep: deciding a parked call again failed; trying again at the next sweep", "call_id", s.ID, "tenant", s.Tenant, "err", err)
			}
			delete(f.checked, tenant) // from the start, next sweep
			return
		}
		m.after = s.ID
	}
	f.checked[tenant] = recheckMark{version: version} // every record looked at
}

// recheckOne denies the record s summarises if it is still pending and the
// policy in force denies its call.
func (f *Flow) recheckOne(ctx context.Context, s approvals.Summary) error {
	rec, err := f.reread(ctx, s)
	if rec == nil {
		return err
	}
	if rec.Decided() {
		return nil
	}
	ref, err := f.core.Denies(ctx, rec.Call)
	if err != nil || ref == nil {
		return err // an error: the tenant is looked at again next sweep
	}
	if err := f.denyByPolicy(ctx, rec, ref); err != nil && !errors.Is(err, approvals.ErrConflict) {
		return err
	}
	return nil
}

// reread reads the record s summarises again (the summary may be stale):
// nil and no error when it is gone (the tracker forgets it), nil and the
// error when the store failed.
func (f *Flow) reread(ctx context.Context, s approvals.Summary) (*approvals.Record, error) {
	rec, err := f.store.Get(ctx, s.Tenant, s.ID)
	if errors.Is(err, approvals.ErrNotFound) {
		f.tracker.Forget(s.Tenant, s.ID)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}
