package poolview

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bounds of a refusal's retry_after.
const (
	minRetryAfter   = time.Second
	maxRetryAfter   = time.Minute
	storeRetryAfter = 30 * time.Second
)

// confirmWait bounds the wait for a fresh read before a refusal.
const confirmWait = time.Second

// Request is what Check needs to know of a call.
type Request struct {
	// Subject is the call's subject on the calls stream: its pool is the
	// consumer whose filter matches it.
	Subject string
	// Keyed says the call has an idempotency key: it writes the
	// idempotency store too.
	Keyed bool
	// ScheduleToStart is how long the call may wait to start from now
	// (ScheduleToStart); 0 = no bound.
	ScheduleToStart time.Duration
}

// Admitted is the pool a call was counted against by Check; the zero
// value is none. Settle it once the call's publish is answered (stored or
// not), or once it is known the call is not published.
type Admitted struct{ pool *poolLoad }

// Settle tells the view that the admitted call's publish is answered: the
// next read of its pool counts it, not this replica's estimate. It does
// nothing for the zero Admitted. Call it once.
func (a Admitted) Settle() { a.pool.settle() }

// Check decides whether the call r describes may be admitted: the pool it
// is counted against (zero: none; Settle it once its publish is
// answered), or the OVERLOADED refusal and which cause
// (telemetry.Overload*) and target (the pool or the store) it was about.
// Before the first read every call is admitted. A refusal that only this
// replica's admissions since the last read bring about waits for a fresh
// read (at most a second, or until ctx ends) and rests on it.
func (l *Load) Check(ctx context.Context, r Request) (admitted Admitted, te *toolwirev1.ToolError, cause, target string) {
	s := l.snap.Load()
	if s == nil {
		return Admitted{}, nil, "", ""
	}
	if te, cause, target := l.checkStores(s, r.Keyed); te != nil {
		return Admitted{}, te, cause, target
	}
	p := s.route(r.Subject)
	if p == nil {
		return Admitted{}, nil, "", ""
	}
	te, cause, local := l.checkPool(p, r.ScheduleToStart)
	if te == nil {
		return Admitted{p}, nil, "", ""
	}
	// A refusal that only this replica's admissions since the last read
	// bring about, on a pool without a queue of a refresh interval's
	// worth, waits for the next read (at most minKickInterval away, plus
	// the read) and rests on it, not on the estimate alone: a fast pool
	// finishes many calls between reads, and while it has no queue its
	// drain rate is the rate calls arrived at, not what it can finish.
	// Callers waiting meanwhile share one read. A pool with such a queue
	// drains at its capacity until the next read: the estimate is
	// trusted, and the refusal is at once.
	if local {
		l.awaitRead(ctx)
		if te, cause, _ = l.checkPool(p, r.ScheduleToStart); te == nil {
			return Admitted{p}, nil, "", ""
		}
	}
	return Admitted{}, te, cause, p.name
}

// CheckStores is the stores' part of Check, which counts the call against
// nothing: nil when no store a call writes (for a keyed call, the
// idempotency store too) is past the high-water mark, else the OVERLOADED
// refusal, its cause (telemetry.OverloadStore) and the store's name.
// Admission asks it before it claims a call's idempotency key, so that a
// refusal writes nothing. Before the first read it refuses nothing.
func (l *Load) CheckStores(keyed bool) (te *toolwirev1.ToolError, cause, target string) {
	s := l.snap.Load()
	if s == nil {
		return nil, "", ""
	}
	return l.checkStores(s, keyed)
}

func (l *Load) checkStores(s *loadSnap, keyed bool) (te *toolwirev1.ToolError, cause, target string) {
	u := s.full
	if u == nil && keyed {
		u = s.keyedFull
	}
	if u == nil {
		return nil, "", ""
	}
	return l.storeRefusal(u), telemetry.OverloadStore, u.Name
}

// Peek is Check that counts the call against nothing: nil when Check
// would admit the call now, else the refusal Check would give, its cause
// and target. Like Check, a refusal that only this replica's admissions
// since the last read bring about waits for a fresh read and rests on
// it. Admission asks it before it claims a keyed call's idempotency key,
// so that an overload refusal of a keyed call writes nothing; Check,
// after the claim, still decides (calls admitted meanwhile may tip the
// pool over). Before the first read it refuses nothing.
func (l *Load) Peek(ctx context.Context, r Request) (te *toolwirev1.ToolError, cause, target string) {
	s := l.snap.Load()
	if s == nil {
		return nil, "", ""
	}
	if te, cause, target := l.checkStores(s, r.Keyed); te != nil {
		return te, cause, target
	}
	p := s.route(r.Subject)
	if p == nil {
		return nil, "", ""
	}
	te, cause, local := l.judgePool(p, p.admitted.Load(), r.ScheduleToStart)
	if te != nil && local {
		l.awaitRead(ctx)
		te, cause, _ = l.judgePool(p, p.admitted.Load(), r.ScheduleToStart)
	}
	if te == nil {
		return nil, "", ""
	}
	return te, cause, p.name
}

// FullRefusal is the OVERLOADED answer to a call whose write the store
// named name refused outright: it filled between two reads of its use
// (every 2s). retry_after is 30s, as for a nearly full store.
func FullRefusal(name string) *toolwirev1.ToolError {
	te := overloaded(fmt.Sprintf("the %s store is full and refused this call's write: new calls that write it are refused until it has room", name),
		storeRetryAfter)
	te.Suggestion = fmt.Sprintf("retry after retry_after; raise its limit (--stream-max-bytes %s=SIZE) or shorten how long it keeps messages", name)
	return te
}

// awaitRead asks for a read now and waits for it (shared with every
// caller waiting meanwhile), at most confirmWait or until ctx ends.
func (l *Load) awaitRead(ctx context.Context) {
	g := l.refreshed.Load()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	t := time.NewTimer(confirmWait)
	select {
	case <-g.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
}

// checkPool is Check for pool p with the figures at hand: nil, and the
// call is counted against p, or the refusal, its cause, and whether it
// needs a fresh read (local; judgePool).
func (l *Load) checkPool(p *poolLoad, s2s time.Duration) (te *toolwirev1.ToolError, cause string, local bool) {
	// Counted first, so that concurrent admissions never all pass at
	// bound-1; given back on refusal. Unsettled before admitted, and given
	// back after it: see published.
	p.unsettled.Add(1)
	n := p.admitted.Add(1)
	te, cause, local = l.judgePool(p, n-1, s2s)
	if te != nil {
		p.admitted.Add(-1)
		p.unsettled.Add(-1)
	}
	return te, cause, local
}

// judgePool is the answer of pool p to one more call, with admitted
// calls admitted by this replica before it: nil, or the refusal, its
// cause, and whether it needs a fresh read (local): the last read alone
// would have admitted the call, and the pool had less than a refresh
// interval's worth of calls queued then, so its drain rate may be below
// what it finishes now. It counts nothing.
func (l *Load) judgePool(p *poolLoad, admitted int64, s2s time.Duration) (te *toolwirev1.ToolError, cause string, local bool) {
	if pause := p.pause.Load(); pause != nil && pause.Paused {
		return pausedRefusal(p.name, pause), telemetry.OverloadPaused, false
	}
	e := p.estimate(admitted, time.Now(), l.cfg.Refresh)
	if p.bound >= 0 && e.backlog >= p.bound {
		after := minRetryAfter
		if e.rate > 0 {
			after = e.stalled + time.Duration(float64(e.backlog-p.bound+1)/e.rate*float64(time.Second))
		}
		te := overloaded(fmt.Sprintf("pool %s has %d calls queued or running, at its bound of %d", p.name, e.backlog, p.bound), after)
		te.Suggestion = "retry after retry_after; the pool needs more workers, or a larger bound (--pool-max-backlog)"
		return te, telemetry.OverloadBacklog, e.readBacklog < p.bound && !e.draining
	}
	if limit := l.waitLimit(p, s2s); limit > 0 && e.rate > 0 {
		if wait := e.wait(e.pending); wait > limit {
			what := fmt.Sprintf("after its schedule-to-start of %s", s2s)
			if s2s <= 0 {
				what = fmt.Sprintf("past the longest wait a call without a schedule-to-start is admitted for (%s)", limit.Round(time.Millisecond))
			}
			te := overloaded(fmt.Sprintf("pool %s would start this call in about %s, %s (%d calls queued, finishing about %.0f a second)",
				p.name, wait.Round(time.Millisecond), what, e.pending, e.rate), wait-limit)
			te.Suggestion = "retry after retry_after, or allow a longer schedule_to_start"
			if s2s <= 0 {
				te.Suggestion = "retry after retry_after, or give the call a schedule_to_start; the pool needs more workers, or a bound of its own (--pool-max-queue-wait)"
			}
			return te, telemetry.OverloadExpectedWait, e.wait(e.readPending) <= limit && !e.draining
		}
	}
	return nil, "", false
}

// waitLimit is the longest expected wait pool p admits a call with
// schedule-to-start s2s (0 = none) for; 0 = no bound. A call without one
// is bounded by the pool's own bound (PoolMaxQueueWait), else by the
// default: the larger of MaxQueueWait and QueueWaitRounds times the
// pool's typical call time (none measured yet: MaxQueueWait), so that a
// pool of slow tools queues a few rounds of its calls. A schedule-to-start
// is a deadline the call expires at, so it keeps headroom for the
// estimate's error: the limit is 90% of it, and at most s2s less one
// refresh interval (the view may be that old when the pool slows), but
// never below half of it.
func (l *Load) waitLimit(p *poolLoad, s2s time.Duration) time.Duration {
	if s2s > 0 {
		return min(s2s*9/10, max(s2s-l.cfg.Refresh, s2s/2))
	}
	switch {
	case p.waitBound != 0:
		return max(p.waitBound, 0)
	case l.cfg.MaxQueueWait < 0:
		return 0
	}
	return max(l.cfg.MaxQueueWait, QueueWaitRounds*time.Duration(p.callTime.Load()))
}

// storeRefusal is the OVERLOADED answer to a call that would write a
// nearly full store.
func (l *Load) storeRefusal(u *storeUse) *toolwirev1.ToolError {
	pct := int(math.Round(100 * float64(u.bytes) / float64(u.MaxBytes)))
	hw := int(math.Round(100 * l.cfg.StoreHighWater))
	if u.account {
		te := overloaded(fmt.Sprintf("the JetStream account's storage is %d%% full (%s of %s): new calls are refused until it is below %d%%",
			pct, bus.FormatBytes(u.bytes), bus.FormatBytes(u.MaxBytes), hw), storeRetryAfter)
		te.Suggestion = "raise the account's storage limit, or lower the stores' limits (--stream-max-bytes)"
		return te
	}
	te := overloaded(fmt.Sprintf("the %s store (stream %s) is %d%% full (%s of %s): new calls are refused until it is below %d%%",
		u.Name, u.Stream, pct, bus.FormatBytes(u.bytes), bus.FormatBytes(u.MaxBytes), hw), storeRetryAfter)
	te.Suggestion = fmt.Sprintf("raise its limit (--stream-max-bytes %s=SIZE) or shorten how long it keeps messages", u.Name)
	return te
}

// overloaded is an OVERLOADED error: retryable, nothing ran, retry_after
// within [minRetryAfter, maxRetryAfter].
func overloaded(msg string, retryAfter time.Duration) *toolwirev1.ToolError {
	return envelope.Overloaded(msg, min(max(retryAfter, minRetryAfter), maxRetryAfter).Round(time.Millisecond))
}

// ScheduleToStart is how long call may wait to start from now; 0 = no
// bound.
func ScheduleToStart(call *toolwirev1.ToolCall, now time.Time) time.Duration {
	if dl := call.GetScheduleToStartDeadline(); dl != nil {
		return max(dl.AsTime().Sub(now), time.Nanosecond)
	}
	return 0
}
