package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The limits step of admission (doc.go, "Limits and budgets"): the last
// before publishing, so a call any earlier step refuses spends nothing.
// Every count is in the limits bucket (internal/limits), shared by every
// replica; nothing is counted per process.

// Lease settings of concurrency slots: the admitting replica renews its
// calls' slots every slotRenew while they run; a replica that dies stops
// renewing, and its slots come back at most slotLease after its last
// renewal.
var (
	slotLease = 30 * time.Second
	slotRenew = 10 * time.Second
)

// maxSlotHold bounds how long a slot is renewed for a call without a
// deadline whose result never comes (its publish ended with the caller's
// context, say, and it was never stored).
const maxSlotHold = time.Hour

// taken is what the limits step took for one call: the slots it holds and
// the budget units it spent, given back when the call is not published.
type taken struct {
	callID string
	slots  []limits.Key
	spent  []spent
	at     time.Time
}

type spent struct {
	key    limits.Key
	units  int64
	budget limits.Budget
}

// limitPlan is one limit as it applies to one call.
type limitPlan struct {
	l    *policy.Limit
	key  limits.Key
	cost int64
}

// takeLimits checks and counts the call against every limit in force that
// covers its tool: concurrency slots first, then budgets, then rates (a
// rate unit cannot be given back, so it is taken last). A refusal gives
// back what the earlier limits took and answers RATE_LIMIT or
// BUDGET_EXCEEDED with retry_after, with the decision record naming the
// limit. An unreachable or full limits bucket refuses the call
// OVERLOADED: a limit is never skipped.
func (d *Dispatcher) takeLimits(ctx context.Context, call *toolwirev1.ToolCall, pd *toolwirev1.PolicyDecision, now time.Time, slots bool) (*taken, *toolwirev1.ToolError, *toolwirev1.PolicyDecision) {
	p := d.policyFor(call.GetCaller().GetTenant())
	ls := p.LimitsFor(call.Tool)
	if len(ls) == 0 || isHookCall(ctx) {
		return nil, nil, nil
	}
	ent, err := d.reg.GetVersion(ctx, call.Tool, call.SpecVersion)
	if err != nil {
		return nil, envelope.Overloaded("the tool's spec could not be read to count its limits", time.Second), limitDecision(p, pd, nil, "")
	}
	plans, te := planLimits(ls, ent.Spec, call)
	if te != nil {
		return nil, te, limitDecision(p, pd, nil, te.Message)
	}
	store := d.limitStore()
	if store == nil {
		return nil, envelope.Overloaded("the limits of this call cannot be counted (no limits store)", time.Second), limitDecision(p, pd, nil, "")
	}
	t := &taken{callID: call.CallId, at: now}
	refuse := func(l *policy.Limit, te *toolwirev1.ToolError) (*taken, *toolwirev1.ToolError, *toolwirev1.PolicyDecision) {
		d.giveBack(context.WithoutCancel(ctx), t)
		return nil, te, limitDecision(p, pd, l, te.Message)
	}
	for _, pl := range plans {
		if pl.l.Concurrency == 0 || !slots {
			continue
		}
		ok, err := acquireSlot(ctx, store, pl, call, now)
		if err != nil {
			return refuse(pl.l, limitsUnavailable(err))
		}
		if !ok {
			msg := fmt.Sprintf("%d calls of this key are running (limit %q)", pl.l.Concurrency, pl.l.ID)
			if pl.l.Wait > 0 {
				msg += "; waited for a slot until the limit's wait or the call's schedule-to-start ran out"
			}
			return refuse(pl.l, rateLimited(pl.l, msg, time.Second))
		}
		t.slots = append(t.slots, pl.key)
	}
	for _, pl := range plans {
		if pl.l.Budget == nil {
			continue
		}
		b := limits.Budget{Limit: pl.l.Budget.Units, Window: pl.l.Budget.Window}
		ok, u, err := store.Spend(ctx, pl.key, pl.cost, b, now)
		if err != nil {
			return refuse(pl.l, limitsUnavailable(err))
		}
		if !ok {
			return refuse(pl.l, budgetExceeded(pl.l, u, pl.cost, now))
		}
		t.spent = append(t.spent, spent{key: pl.key, units: pl.cost, budget: b})
	}
	for _, pl := range plans {
		if pl.l.Rate == nil {
			continue
		}
		r := limits.Rate{Count: pl.l.Rate.Count, Per: pl.l.Rate.Per, Burst: pl.l.Rate.Burst}
		ok, after, err := store.Allow(ctx, pl.key, r, pl.cost, now)
		if err != nil {
			return refuse(pl.l, limitsUnavailable(err))
		}
		if !ok {
			return refuse(pl.l, rateLimited(pl.l, fmt.Sprintf("over %d per %s (limit %q)", pl.l.Rate.Count, pl.l.Rate.Per, pl.l.ID), after))
		}
	}
	return t, nil, nil
}

// acquireSlot takes a concurrency slot of pl's key for the call; over the
// cap, it tries again (20 ms doubling to 250 ms) for the limit's wait, and
// never past the call's schedule-to-start deadline or ctx: false when no
// slot came free by then.
func acquireSlot(ctx context.Context, store *limits.Store, pl limitPlan, call *toolwirev1.ToolCall, now time.Time) (bool, error) {
	ok, err := store.Acquire(ctx, pl.key, pl.l.Concurrency, call.CallId, slotLease, now)
	if ok || err != nil || pl.l.Wait <= 0 {
		return ok, err
	}
	deadline := now.Add(pl.l.Wait)
	if dl := call.GetScheduleToStartDeadline(); dl != nil && dl.AsTime().Before(deadline) {
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
		if ok, err = store.Acquire(ctx, pl.key, pl.l.Concurrency, call.CallId, slotLease, time.Now()); ok || err != nil {
			return ok, err
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// planLimits resolves each limit's key and cost for the call; a key or
// cost that cannot be evaluated refuses the call (fail closed).
func planLimits(ls []*policy.Limit, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) ([]limitPlan, *toolwirev1.ToolError) {
	in := policy.Input{Tool: spec, Caller: call.Caller}
	plans := make([]limitPlan, 0, len(ls))
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
		plans = append(plans, limitPlan{l: l, key: limits.Key{Tenant: call.GetCaller().GetTenant(), Limit: l.ID, Value: v}, cost: cost})
	}
	return plans, nil
}

// limitDecision is the decision record of a call a limit refused: the
// policy's allow turned into a deny naming the limit ("limit:<id>").
func limitDecision(p *policy.Policy, allowed *toolwirev1.PolicyDecision, l *policy.Limit, msg string) *toolwirev1.PolicyDecision {
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

func budgetExceeded(l *policy.Limit, u limits.Usage, cost int64, now time.Time) *toolwirev1.ToolError {
	msg := fmt.Sprintf("budget exceeded: limit %q has %d of %d units left in this %s window, the call costs %d; it resets at %s",
		l.ID, u.Remaining, u.Limit, l.Budget.Window, cost, u.ResetAt.Format(time.RFC3339))
	if l.Reason != "" {
		msg += ": " + l.Reason
	}
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, Message: msg, Retryable: true,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(max(u.ResetAt.Sub(now), time.Second)),
		Suggestion: "wait for the window to reset, or ask an administrator for a larger budget (`toolctl usage` shows it)"}
}

func limitsUnavailable(err error) *toolwirev1.ToolError {
	return envelope.Overloaded("the limits of this call cannot be counted now: "+err.Error(), time.Second)
}

// giveBack releases the slots t holds and refunds the budget units it
// spent: for a call that is not published after all.
func (d *Dispatcher) giveBack(ctx context.Context, t *taken) {
	if t == nil {
		return
	}
	store := d.limitStore()
	for _, k := range t.slots {
		if err := store.Release(ctx, k, t.callID); err != nil {
			d.log.WarnContext(ctx, "a concurrency slot was not given back; its lease ends it", "limit", k.Limit, "err", err)
		}
	}
	for _, s := range t.spent {
		if _, err := store.Refund(ctx, s.key, s.units, s.budget, t.at); err != nil {
			d.log.WarnContext(ctx, "budget units were not refunded", "limit", s.key.Limit, "units", s.units, "err", err)
		}
	}
}

// slotHolder tracks the concurrency slots of the calls this replica
// admitted until their results come (onStored): it renews their leases
// and releases them. A replica that dies holds them until their leases
// end.
type slotHolder struct {
	mu    sync.Mutex
	calls map[string]*heldSlots
	// closed: Stop began; no release starts any more (their leases end
	// them).
	closed bool
}

type heldSlots struct {
	keys  []limits.Key
	until time.Time // renewed until then at most
}

// hold starts renewing the slots t took for the published call.
func (d *Dispatcher) hold(call *toolwirev1.ToolCall, t *taken) {
	if t == nil || len(t.slots) == 0 {
		return
	}
	until := t.at.Add(maxSlotHold)
	if dl := call.GetDeadline(); dl != nil {
		until = dl.AsTime().Add(slotRenew)
	}
	d.slots.mu.Lock()
	if d.slots.calls == nil {
		d.slots.calls = map[string]*heldSlots{}
	}
	d.slots.calls[call.CallId] = &heldSlots{keys: t.slots, until: until}
	d.slots.mu.Unlock()
}

// unhold stops tracking the slots of a call that was not published (they
// are given back by giveBack).
func (d *Dispatcher) unhold(callID string) {
	d.slots.mu.Lock()
	delete(d.slots.calls, callID)
	d.slots.mu.Unlock()
}

// settled releases the slots of a call whose result this replica saw. It
// runs on the results consumer's goroutine: the release runs on its own.
func (d *Dispatcher) settled(callID string) {
	d.slots.mu.Lock()
	h := d.slots.calls[callID]
	delete(d.slots.calls, callID)
	if h == nil || d.slots.closed {
		d.slots.mu.Unlock()
		return
	}
	d.slotWork.Add(1) // under mu: before the stopper's Wait (it sets closed under mu first)
	d.slots.mu.Unlock()
	go func() {
		defer d.slotWork.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range h.keys {
			if err := d.limitStore().Release(ctx, k, callID); err != nil {
				d.log.Warn("a concurrency slot was not released; its lease ends it", "call_id", callID, "limit", k.Limit, "err", err)
			}
		}
	}()
}

// startSlotRenewal renews the leases of the held slots every slotRenew.
func (d *Dispatcher) startSlotRenewal() stopper {
	renew := every(slotRenew, d.renewSlots)
	return func() <-chan struct{} {
		done := renew()
		d.slots.mu.Lock()
		d.slots.closed = true
		d.slots.mu.Unlock()
		all := make(chan struct{})
		go func() {
			<-done
			d.slotWork.Wait()
			close(all)
		}()
		return all
	}
}

func (d *Dispatcher) renewSlots(ctx context.Context) {
	now := time.Now()
	d.slots.mu.Lock()
	type renewal struct {
		callID string
		keys   []limits.Key
	}
	var todo []renewal
	for id, h := range d.slots.calls {
		if now.After(h.until) {
			delete(d.slots.calls, id) // its lease ends it
			continue
		}
		todo = append(todo, renewal{id, h.keys})
	}
	d.slots.mu.Unlock()
	store := d.limitStore()
	for _, r := range todo {
		for _, k := range r.keys {
			if _, err := store.Renew(ctx, k, r.callID, slotLease, now); err != nil && ctx.Err() == nil {
				d.log.Warn("a concurrency slot's lease was not renewed", "call_id", r.callID, "limit", k.Limit, "err", err)
			}
		}
	}
}

// limitStore returns the limits store (made by Start), nil before.
func (d *Dispatcher) limitStore() *limits.Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.limitsStore
}

// startLimits opens the limits store over the bus's limits bucket and
// starts renewing slots.
func (d *Dispatcher) startLimits(ctx context.Context) (stopper, error) {
	if d.bus.Limits == nil {
		return func() <-chan struct{} { return closedChan }, nil
	}
	s, err := limits.New(ctx, d.bus.JS, limits.Config{Bucket: d.bus.Limits.Bucket(), Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("dispatch: limits: %w", err)
	}
	d.mu.Lock()
	d.limitsStore = s
	d.mu.Unlock()
	renew := d.startSlotRenewal()
	return func() <-chan struct{} {
		done := make(chan struct{})
		go func() {
			<-renew()
			s.Close()
			close(done)
		}()
		return done
	}, nil
}

// ErrNotYours: a caller without the admin scope asked for another agent's
// usage.
var ErrNotYours = errors.New(`dispatch: the usage of another agent needs the "admin" scope`)

// UsageFilter names whose usage to read: the caller's own agent and no
// session when empty.
type UsageFilter struct {
	Agent, Session, User, Run string
}

// Usage is one limit's state for one key.
type Usage struct {
	Limit  string
	Reason string
	// Key is how the limit counts (tenant, agent, session, user, run,
	// tool or a CEL expression) and Value the key it was read for; Value
	// is empty and nothing is read for tool and CEL keys (they depend on
	// each call).
	Key, Value  string
	Rate        *policy.LimitRate
	Concurrency int
	// InFlight is how many calls hold a slot now (concurrency limits).
	InFlight int
	Budget   *policy.LimitBudget
	// Used and Remaining are the budget's current window, which ends at
	// ResetAt.
	Used, Remaining int64
	ResetAt         time.Time
}

// Usage reads the limits in force for the caller's tenant as they stand
// for f's agent, session, user and run (admins may name any of their
// tenant's; other callers only their own agent).
func (d *Dispatcher) Usage(ctx context.Context, id identity.Identity, f UsageFilter) ([]Usage, error) {
	if f.Agent == "" {
		f.Agent = id.Agent
	}
	if f.Agent != id.Agent && !registry.HasScopes(id.Scopes, []string{AdminScope}) {
		return nil, ErrNotYours
	}
	p := d.policyFor(id.Tenant)
	store := d.limitStore()
	now := time.Now()
	var out []Usage
	for _, l := range p.Limits() {
		u := Usage{Limit: l.ID, Reason: l.Reason, Key: l.Key, Rate: l.Rate, Concurrency: l.Concurrency, Budget: l.Budget}
		switch l.Key {
		case "tenant":
			u.Value = id.Tenant
		case "agent":
			u.Value = f.Agent
		case "session":
			u.Value = f.Session
		case "user":
			u.Value = f.User
		case "run":
			u.Value = f.Run
		default:
			out = append(out, u)
			continue
		}
		if store == nil {
			return nil, errors.New("dispatch: no limits store")
		}
		key := limits.Key{Tenant: id.Tenant, Limit: l.ID, Value: u.Value}
		if l.Concurrency > 0 {
			n, err := store.InFlight(ctx, key, now)
			if err != nil {
				return nil, fmt.Errorf("dispatch: usage of %q: %w", l.ID, err)
			}
			u.InFlight = n
		}
		if b := l.Budget; b != nil {
			bu, err := store.Usage(ctx, key, limits.Budget{Limit: b.Units, Window: b.Window}, now)
			if err != nil {
				return nil, fmt.Errorf("dispatch: usage of %q: %w", l.ID, err)
			}
			u.Used, u.Remaining, u.ResetAt = bu.Used, bu.Remaining, bu.ResetAt
		}
		out = append(out, u)
	}
	return out, nil
}
