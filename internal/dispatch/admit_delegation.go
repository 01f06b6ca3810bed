package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/poolview"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// delegationStep is the delegation step of admission (doc.go, "Delegation
// chains"), for a call that names the call on whose behalf it is made
// (CallRequest.parent_call_id). The parent must be a call of the caller's
// tenant that the caller may see (else NOT_FOUND, as a made-up id), still
// on its way (not finished: CONFLICT; not cancelled: CANCELLED; not
// parked for an approver: CONFLICT), with fewer than
// Config.MaxDelegationDepth calls above it, fewer than
// Config.MaxDelegationFanOut children and fewer than
// Config.MaxDelegationDescendants calls in its chain (PERMISSION_DENIED,
// rules "delegation.max_depth", "delegation.max_fan_out" and
// "delegation.max_descendants"). The call's link is written before the
// parent's tombstone is read: a cancel of the parent writes its tombstone
// before it lists the children, so a child is either refused here or
// cancelled there. (A parent this replica does not remember has its
// state read first, and its link then, which readParent remembers; a
// remembered one's result is read after the link is written, with the
// tombstone. Which is refused first, a parent too deep or one that has
// finished, depends on that: both are refused.) The bounds are counters, which the call adds itself to
// and reads in one request each, shared with the children of the same
// parent admitted at the same time (countChildStep). A repeat of an
// idempotency key that is bound is answered as the original call instead
// of refused for its parent's state or a bound (repeatOr). The call then
// carries its chain in its Caller, where the policy reads it.
func (a *admission) delegationStep(ctx context.Context) verdict {
	parent := a.req.GetParentCallId()
	if parent == "" {
		return next
	}
	d, tenant := a.d, a.id.Tenant
	if te := a.reachParent(ctx, parent); te != nil {
		return a.refused(te, nil)
	}
	seen, known := d.parents.get(tenant, parent)
	pl, tool := seen.link, seen.tool
	if !known {
		// Not remembered: the parent's records are read first, its state
		// and, once it is known stored, its link (readParent remembers
		// both); only its tombstone must be read after the call's link
		// is written.
		var te *toolwirev1.ToolError
		if tool, te = a.parentState(ctx, parent); te != nil {
			return a.repeatOr(ctx, te, nil)
		}
		var err error
		if pl, err = a.linkOfParent(ctx, parent); err != nil {
			return a.refused(a.chainFailed(ctx, err), nil)
		}
	}
	if int(pl.Depth) >= d.cfg.MaxDelegationDepth {
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("delegation too deep: parent call %s is already %d calls below its root (at most %d)", parent, pl.Depth, d.cfg.MaxDelegationDepth)),
			delegationDecision("delegation.max_depth"))
	}
	l := link{Parent: parent, Root: pl.Root, Depth: pl.Depth + 1}
	a.chain, a.linked = &l, a.callID
	if err := d.recordLink(ctx, tenant, a.callID, l); err != nil {
		return a.refused(a.chainFailed(ctx, err), nil)
	}
	var te *toolwirev1.ToolError
	if known {
		te = a.seenParentState(ctx, parent, seen)
	} else {
		te = a.parentTombstone(ctx, parent)
	}
	if te != nil {
		return a.repeatOr(ctx, te, nil)
	}
	if v := a.countChildStep(ctx, countChildren); v != next {
		return v
	}
	if v := a.countChildStep(ctx, countDescendants); v != next {
		return v
	}
	c := a.call.Caller
	c.ParentCallId, c.RootCallId, c.Depth, c.ParentTool = l.Parent, l.Root, l.Depth, tool
	return next
}

// countChildStep adds the call to count c (its parent's children, or its
// root's chain) and refuses it when the count with it is past the bound.
// A call added is taken out again when it is refused or answered as
// another (forgetChain); a request that failed may have added it or not,
// and is not taken back: the place it may hold is freed when the counter
// expires (fails closed).
func (a *admission) countChildStep(ctx context.Context, c chainCount) verdict {
	d, l := a.d, a.chain
	n, err := d.countChild(ctx, a.id.Tenant, *l, c)
	if err != nil {
		return a.refused(a.chainFailed(ctx, err), nil)
	}
	a.counted |= c
	switch {
	case c == countChildren && n > int64(d.cfg.MaxDelegationFanOut):
		return a.repeatOr(ctx, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("parent call %s has reached its bound of %d delegated calls", l.Parent, d.cfg.MaxDelegationFanOut)),
			delegationDecision("delegation.max_fan_out"))
	case c == countDescendants && n > int64(d.cfg.MaxDelegationDescendants):
		return a.repeatOr(ctx, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("the delegation chain of call %s has reached its bound of %d calls", l.Root, d.cfg.MaxDelegationDescendants)),
			delegationDecision("delegation.max_descendants"))
	}
	return next
}

// uncount takes a call that was refused or answered as another out of
// the counts it was added to (a.counted), as forgetChain forgets its
// keys. Best effort: a count not taken back (a dispatcher that died in
// between, a failed request) holds a place until its counter expires,
// CancelTTL after its last change; a child counts that long anyway.
func (a *admission) uncount(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, c := range []chainCount{countChildren, countDescendants} {
		if a.counted&c == 0 {
			continue
		}
		if _, err := bus.AddToCounter(ctx, a.d.bus.NC, a.d.countSubject(a.id.Tenant, *a.chain, c), -1); err != nil {
			a.d.log.WarnContext(ctx, "delegated call not uncounted", "call_id", a.linked, "err", err)
		}
	}
	a.counted = 0
}

// repeatOr refuses the call with te and pd, unless it repeats an
// idempotency key that is bound: then it is answered as the idempotency
// step answers a bound key (the original call, or CONFLICT naming it),
// since the parent's state or fan-out has changed since the original
// call (it finished, was cancelled, has its children), not the call.
// The repeat's own link is forgotten, and it is taken out of the counts,
// either way.
func (a *admission) repeatOr(ctx context.Context, te *toolwirev1.ToolError, pd *toolwirev1.PolicyDecision) verdict {
	if a.req.IdempotencyKey == "" {
		return a.refused(te, pd)
	}
	s, err := a.d.boundKey(ctx, a.id, a.call)
	if err != nil || s == nil {
		return a.refused(te, pd) // an unbound key (or an unreadable one): the refusal stands
	}
	a.forgetChain(ctx)
	return a.answered(s, nil, nil)
}

// reachParent refuses a parent that is not a call id the caller may see:
// the same answer for another tenant's or agent's call as for a made-up id.
func (a *admission) reachParent(ctx context.Context, parent string) *toolwirev1.ToolError {
	if _, err := ulid.ParseStrict(parent); err != nil {
		return unknownParent(cutName(parent))
	}
	ok, err := a.d.reaches(ctx, a.id, parent)
	if err != nil {
		return a.chainFailed(ctx, err)
	}
	if !ok {
		return unknownParent(parent)
	}
	return nil
}

// parentState returns the parent's tool when it is on its way, else the
// refusal: unknown, finished or parked. Its records are read once for the
// children being admitted at the same time (lookParent); its tombstone
// is read after each one's own link was written (delegationStep: a read
// shared only by children that wrote theirs before it started,
// groupCommit).
func (a *admission) parentState(ctx context.Context, parent string) (string, *toolwirev1.ToolError) {
	p, err := a.d.lookParent(ctx, a.id, parent)
	if err != nil {
		return "", a.chainFailed(ctx, err)
	}
	switch p.state {
	case toolwirev1.CallState_CALL_STATE_UNKNOWN:
		return "", unknownParent(parent)
	case toolwirev1.CallState_CALL_STATE_DONE:
		return "", parentFinished(parent)
	case toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		return "", envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, "parent call "+parent+" waits for an approval: it is not running")
	}
	return p.tool, nil
}

// linkOfParent is the link of parent, read by parentState: remembered with
// it when it was found stored (readParent), else read from its key.
func (a *admission) linkOfParent(ctx context.Context, parent string) (link, error) {
	if seen, ok := a.d.parents.get(a.id.Tenant, parent); ok {
		return seen.link, nil
	}
	return a.d.linkOf(ctx, a.id.Tenant, parent)
}

// seenParentState is parentState and the tombstone's read for a parent
// remembered (parentsSeen): published, so neither unknown nor parked;
// finished when its result is stored, on the one subject its admitter's
// name makes (in the results stream, or in the archive as GetResult
// reads it).
func (a *admission) seenParentState(ctx context.Context, parent string, seen seenParent) *toolwirev1.ToolError {
	finished, _, err := a.d.resultReads.do(ctx, seen.result, func(ctx context.Context, _ int) (bool, error) {
		resp, err := a.d.findResult(ctx, seen.result, seen.tool)
		return resp != nil, err
	})
	switch {
	case err != nil:
		return a.chainFailed(ctx, err)
	case finished:
		a.d.parents.forget(parent)
		return parentFinished(parent)
	}
	return a.parentTombstone(ctx, parent)
}

// parentTombstone refuses the call when its parent has a cancel
// tombstone: read after the call's link was written (delegationStep),
// and again right before the call is published (parentGone: a cancel of
// the parent may have come while the call was in admission). It is read
// from the cancels bucket's leader (bus.KVGetFromLeader): a direct get
// may be answered by a replica that has not yet stored a tombstone the
// leader acknowledged, and the cascade's ordering (the link written
// before this read, the tombstone before the children are listed) holds
// only if both sides see what the other wrote first.
//
// The children of one parent admitted at the same time share the reads
// (groupCommit): a read starts after every child it answers joined it,
// so after each one's link was written.
func (a *admission) parentTombstone(ctx context.Context, parent string) *toolwirev1.ToolError {
	d, tenant := a.d, a.id.Tenant
	cancelled, _, err := d.tombstoneReads.do(ctx, toolKey(tenant, parent), func(ctx context.Context, _ int) (bool, error) {
		_, err := bus.KVGetFromLeader(ctx, d.bus.NC, d.bus.Config.CancelBucket(), bus.CancelKey(tenant, parent))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return false, nil
		}
		return false, err
	})
	switch {
	case err != nil:
		return a.chainFailed(ctx, fmt.Errorf("dispatch: read parent's tombstone: %w", err))
	case cancelled:
		return parentCancelled(parent)
	}
	return nil
}

func parentFinished(parent string) *toolwirev1.ToolError {
	return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, "parent call "+parent+" has finished: no call can be made on its behalf")
}

func parentCancelled(parent string) *toolwirev1.ToolError {
	return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, "parent call "+parent+" was cancelled")
}

// chainFailed is the refusal of a call whose chain could not be read or
// written (INTERNAL; the cause is logged, not told).
// A limits bucket too full to take the chain's keys is OVERLOADED with
// retry_after, as any full store (poolview.FullRefusal).
func (a *admission) chainFailed(ctx context.Context, err error) *toolwirev1.ToolError {
	if bus.StoreFull(err) {
		a.d.log.WarnContext(ctx, "delegation chain not written: the limits store is full", "call_id", a.callID, "err", err)
		return poolview.FullRefusal(limitsStore)
	}
	a.d.log.WarnContext(ctx, "delegation chain not checked", "call_id", a.callID, "err", err)
	return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "the delegation chain could not be checked; try again")
}

// limitsStore is the limits bucket's name among the stores
// (bus.Config.Stores).
const limitsStore = "limits"

func unknownParent(parent string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, "parent call "+parent+" not found")
	te.Suggestion = "parent_call_id names a call of your tenant that is still running"
	return te
}

// delegationDecision records which bound refused a delegated call.
func delegationDecision(rule string) *toolwirev1.PolicyDecision {
	return &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, RuleId: rule, Reason: rule}
}
