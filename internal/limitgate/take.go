package limitgate

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Call is one admitted call at the limits step.
type Call struct {
	// Call is the call as it will be published (its id, tool, pinned spec
	// version, caller, arguments and deadlines).
	Call *toolwirev1.ToolCall
	// Allowed is the policy step's decision; a refusal's record keeps its
	// grant and approval.
	Allowed *toolwirev1.PolicyDecision
	// Now is when the call was admitted.
	Now time.Time
	// Slots says whether the call takes concurrency slots: false for an
	// ask being parked (counted by its rates and budgets only).
	Slots bool
	// Args are the call's arguments as admission parsed them once
	// (policy.ParseArgs); nil = Take parses them if a limit needs them.
	Args *policy.Args
}

// Ticket is what Take took for one call: the slots it holds and the
// budget units it spent, given back (GiveBack) when the call is not
// published. A nil Ticket took nothing.
type Ticket struct {
	callID   string
	tool     string
	slots    []limits.Key
	spent    []spent
	at       time.Time
	deadline time.Time // the call's; zero for none
}

type spent struct {
	key    limits.Key
	units  int64
	budget limits.Budget
}

// Refusal is a call a limit refused: the answer and the decision record
// naming the limit ("limit:<id>").
type Refusal struct {
	Error    *toolwirev1.ToolError
	Decision *toolwirev1.PolicyDecision
}

// plan is one limit as it applies to one call.
type plan struct {
	l    *policy.Limit
	key  limits.Key
	cost int64
}

// Take checks and counts the call against every limit in force that
// covers its tool: concurrency slots first, then budgets, then rates (a
// rate unit cannot be given back, so it is taken last). A refusal gives
// back what the earlier limits took and answers RATE_LIMIT or
// BUDGET_EXCEEDED with retry_after, with the decision record naming the
// limit. An unreachable or full limits bucket refuses the call
// OVERLOADED: a limit is never skipped. No limit covering the tool
// returns a nil Ticket and no Refusal.
func (g *Gate) Take(ctx context.Context, c Call) (*Ticket, *Refusal) {
	p := g.policyFor(c.Call.GetCaller().GetTenant())
	ls := p.LimitsFor(c.Call.Tool)
	if len(ls) == 0 {
		return nil, nil
	}
	ent, err := g.cfg.Specs.GetVersion(ctx, c.Call.Tool, c.Call.SpecVersion)
	if err != nil {
		te := envelope.Overloaded("the tool's spec could not be read to count its limits", time.Second)
		return nil, &Refusal{Error: te, Decision: decision(p, c.Allowed, nil, "")}
	}
	plans, te := planLimits(ls, ent.Spec, c)
	if te != nil {
		return nil, &Refusal{Error: te, Decision: decision(p, c.Allowed, nil, te.Message)}
	}
	store := g.Store()
	if store == nil {
		te := envelope.Overloaded("the limits of this call cannot be counted (no limits store)", time.Second)
		return nil, &Refusal{Error: te, Decision: decision(p, c.Allowed, nil, "")}
	}
	t, l, te := g.takeAll(ctx, store, plans, c)
	if te != nil {
		g.GiveBack(context.WithoutCancel(ctx), t)
		return nil, &Refusal{Error: te, Decision: decision(p, c.Allowed, l, te.Message)}
	}
	return t, nil
}

// takeAll takes the slots, budget units and rate units of plans; on a
// refusal it also returns the limit that refused and the answer, and the
// Ticket holds what was taken before it.
func (g *Gate) takeAll(ctx context.Context, store *limits.Store, plans []plan, c Call) (*Ticket, *policy.Limit, *toolwirev1.ToolError) {
	t := &Ticket{callID: c.Call.CallId, tool: c.Call.Tool, at: c.Now}
	if dl := c.Call.GetDeadline(); dl != nil {
		t.deadline = dl.AsTime()
	}
	for _, pl := range plans {
		if pl.l.Concurrency == 0 || !c.Slots {
			continue
		}
		ok, err := g.acquireSlot(ctx, store, pl, c)
		if err != nil {
			return t, pl.l, unavailable(err)
		}
		if !ok {
			msg := fmt.Sprintf("%d calls of this key are running (limit %q)", pl.l.Concurrency, pl.l.ID)
			if pl.l.Wait > 0 {
				msg += "; waited for a slot until the limit's wait or the call's schedule-to-start ran out"
			}
			return t, pl.l, rateLimited(pl.l, msg, time.Second)
		}
		t.slots = append(t.slots, pl.key)
	}
	for _, pl := range plans {
		if pl.l.Budget == nil {
			continue
		}
		b := limits.Budget{Limit: pl.l.Budget.Units, Window: pl.l.Budget.Window}
		ok, u, err := store.Spend(ctx, pl.key, pl.cost, b, c.Now)
		if err != nil {
			return t, pl.l, unavailable(err)
		}
		if !ok {
			return t, pl.l, budgetExceeded(pl, u, c.Now)
		}
		t.spent = append(t.spent, spent{key: pl.key, units: pl.cost, budget: b})
	}
	for _, pl := range plans {
		if pl.l.Rate == nil {
			continue
		}
		r := limits.Rate{Count: pl.l.Rate.Count, Per: pl.l.Rate.Per, Burst: pl.l.Rate.Burst}
		ok, after, err := store.Allow(ctx, pl.key, r, pl.cost, c.Now)
		if err != nil {
			return t, pl.l, unavailable(err)
		}
		if !ok {
			return t, pl.l, rateLimited(pl.l, fmt.Sprintf("over %d per %s (limit %q)", pl.l.Rate.Count, pl.l.Rate.Per, pl.l.ID), after)
		}
	}
	return t, nil, nil
}

// acquireSlot takes a concurrency slot of pl's key for the call; over the
// cap, it tries again (20 ms doubling to 250 ms) for the limit's wait, and
// never past the call's schedule-to-start deadline or ctx: false when no
// slot came free by then.
func (g *Gate) acquireSlot(ctx context.Context, store *limits.Store, pl plan, c Call) (bool, error) {
	ok, err := store.Acquire(ctx, pl.key, pl.l.Concurrency, c.Call.CallId, g.cfg.SlotLease, c.Now)
	if ok || err != nil || pl.l.Wait <= 0 {
		return ok, err
	}
	deadline := c.Now.Add(pl.l.Wait)
	if dl := c.Call.GetScheduleToStartDeadline(); dl != nil && dl.AsTime().Before(deadline) {
		deadline = dl.AsTime()
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pause := 20 * time.Millisecond
	for {
		t := time.NewTimer(pause)
		select {
		case <-wctx.Done():
			t.Stop()
			return false, nil
		case <-t.C:
		}
		if ok, err = store.Acquire(ctx, pl.key, pl.l.Concurrency, c.Call.CallId, g.cfg.SlotLease, time.Now()); ok || err != nil {
			return ok, err
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// planLimits resolves each limit's key and cost for the call; a key or
// cost that cannot be evaluated refuses the call (fail closed).
func planLimits(ls []*policy.Limit, spec *toolwirev1.ToolSpec, c Call) ([]plan, *toolwirev1.ToolError) {
	call := c.Call
	in := policy.Input{Tool: spec, Caller: call.Caller, Args: c.Args, CallID: call.CallId}
	plans := make([]plan, 0, len(ls))
	for _, l := range ls {
		if in.Args == nil && l.NeedsArgs() {
			args, err := policy.ParseArgs(call.Arguments)
			if err != nil {
				return nil, registry.Violation("", err.Error())
			}
			in.Args = args
		}
		v, err := l.KeyOf(&in)
		if err != nil {
			return nil, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				fmt.Sprintf("limit %q cannot count this call: %v", l.ID, err))
		}
		cost, err := l.CostOf(&in)
		if err != nil {
			return nil, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				fmt.Sprintf("limit %q cannot price this call: %v", l.ID, err))
		}
		plans = append(plans, plan{l: l, key: limits.Key{Tenant: call.GetCaller().GetTenant(), Limit: l.ID, Value: v}, cost: cost})
	}
	return plans, nil
}

// decision is the decision record of a call a limit refused: the
// policy's allow turned into a deny naming the limit ("limit:<id>").
func decision(p *policy.Policy, allowed *toolwirev1.PolicyDecision, l *policy.Limit, msg string) *toolwirev1.PolicyDecision {
	pd := &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, Version: p.Version(), Reason: msg}
	if allowed != nil {
		pd.GrantId, pd.ApprovalId, pd.RequiresApproval = allowed.GrantId, allowed.ApprovalId, allowed.RequiresApproval
	}
	if l != nil {
		pd.RuleId = "limit:" + l.ID
		if l.Reason != "" {
			pd.Reason = l.Reason
		}
	}
	return pd
}

func rateLimited(l *policy.Limit, what string, after time.Duration) *toolwirev1.ToolError {
	msg := "rate limited: " + what
	if l.Reason != "" {
		msg += ": " + l.Reason
	}
	after = max(after, time.Millisecond)
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Message: msg, Retryable: true,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(after),
		Suggestion: fmt.Sprintf("retry after %s", after.Round(time.Millisecond))}
}

func budgetExceeded(pl plan, u limits.Usage, now time.Time) *toolwirev1.ToolError {
	l := pl.l
	msg := fmt.Sprintf("budget exceeded: limit %q has %d of %d units left in this %s window, the call costs %d; it resets at %s",
		l.ID, u.Remaining, u.Limit, l.Budget.Window, pl.cost, u.ResetAt.Format(time.RFC3339))
	if l.Reason != "" {
		msg += ": " + l.Reason
	}
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, Message: msg, Retryable: true,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(max(u.ResetAt.Sub(now), time.Second)),
		Suggestion: "wait for the window to reset, or ask an administrator for a larger budget (`toolctl usage` shows it)"}
}

func unavailable(err error) *toolwirev1.ToolError {
	return envelope.Overloaded("the limits of this call cannot be counted now: "+err.Error(), time.Second)
}

// GiveBack releases the slots t holds and refunds the budget units it
// spent: for a call that is not published after all. A nil t took
// nothing.
func (g *Gate) GiveBack(ctx context.Context, t *Ticket) {
	if t == nil {
		return
	}
	store := g.Store()
	for _, k := range t.slots {
		if err := store.Release(ctx, k, t.callID); err != nil {
			g.log.WarnContext(ctx, "a concurrency slot was not given back; its lease ends it", "limit", k.Limit, "err", err)
		}
	}
	for _, s := range t.spent {
		if _, err := store.Refund(ctx, s.key, s.units, s.budget, t.at); err != nil {
			g.log.WarnContext(ctx, "budget units were not refunded", "limit", s.key.Limit, "units", s.units, "err", err)
		}
	}
}
