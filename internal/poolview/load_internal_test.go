package poolview

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
)

// A read of a pool's consumer taken while a call admitted here is still
// being published does not find that call: the call stays in what this
// replica admitted since the read, and the next call at the bound is
// refused (it was admitted, the read having forgotten the call).
func TestReadDuringAPublishKeepsTheCallCounted(t *testing.T) {
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}}
	p := &poolLoad{name: "native", bound: 3}
	for range 3 {
		if te, _, _ := v.checkPool(p, 0); te != nil {
			t.Fatalf("refused below the bound: %s", te.Message)
		}
	}
	p.settle()
	p.settle() // two stored; the third's publish is not answered yet

	// The read: the consumer has the two stored calls.
	p.admittedAtRead.Store(p.published())
	p.pending.Store(0)
	p.ackPending.Store(2)
	p.readAt.Store(time.Now().UnixNano())

	if te, _, _ := v.checkPool(p, 0); te == nil {
		t.Fatal("a fourth call was admitted with three queued or running")
	}
	p.settle() // the third is stored; the next read finds it
	p.admittedAtRead.Store(p.published())
	p.ackPending.Store(3)
	if te, _, _ := v.checkPool(p, 0); te == nil {
		t.Fatal("a fourth call was admitted after the read found three")
	}
}

// Peek gives the answer Check would give and counts nothing: at the
// bound it refuses as Check does, below it it admits without taking the
// pool's last place, which Check then takes.
func TestPeekCountsNothing(t *testing.T) {
	p := &poolLoad{name: "native", bound: 2}
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}}
	v.snap.Store(&loadSnap{pools: []poolRoute{{p, []string{"calls.>"}}}, routes: &routeCache{}})
	r := Request{Subject: "calls.native.echo"}
	p.ackPending.Store(1) // the last read: one running
	p.readAt.Store(time.Now().UnixNano())
	for range 3 {
		if te, _, _ := v.Peek(t.Context(), r); te != nil {
			t.Fatalf("refused below the bound: %s", te.Message)
		}
	}
	if p.admitted.Load() != 0 || p.unsettled.Load() != 0 {
		t.Fatal("Peek counted a call")
	}
	a, te, _, _ := v.Check(t.Context(), r)
	if te != nil {
		t.Fatalf("Check refused the pool's last place: %s", te.Message)
	}
	a.Settle()
	p.admittedAtRead.Store(p.published()) // a read finds both
	p.ackPending.Store(2)
	te, cause, target := v.Peek(t.Context(), r)
	if te == nil || cause != "backlog" || target != "native" {
		t.Fatalf("at the bound: %v %q %q", te, cause, target)
	}
}

// feed gives pool p reads every 500ms from t0 on, each finding done more
// calls finished with inFlight running, and returns when the last was.
func feed(p *poolLoad, t0 time.Time, inFlight int64, done ...uint64) time.Time {
	at := t0
	for _, n := range done {
		at = at.Add(500 * time.Millisecond)
		p.measure(p.lastDelivered+n, inFlight, at)
	}
	return at
}

func rateOf(p *poolLoad) float64 { return math.Float64frombits(p.rate.Load()) }

// A pool that slows down is seen slower at the next read: the drain rate
// admission bounds a call's wait with is the lower of the last 500ms and
// the last 2s, not the mean of 2s (which over-admitted calls that then
// expired, as the pool finished a tenth of what it had).
func TestDrainRateFallsAsFastAsThePoolSlows(t *testing.T) {
	p := &poolLoad{name: "native"}
	t0 := time.Unix(1000, 0)
	p.measure(0, 8, t0)
	at := feed(p, t0, 8, 200, 200, 200, 200) // 400 calls a second
	if r := rateOf(p); r < 390 || r > 410 {
		t.Fatalf("steady pool: rate %.0f, want 400", r)
	}
	feed(p, at, 8, 20) // one read at a tenth of it
	if r := rateOf(p); r > 41 {
		t.Fatalf("after a read at 40 calls a second the rate is %.0f", r)
	}
}

// A pool whose calls in flight stop finishing (slow calls, workers that
// stopped answering, a stream electing a leader) is stalled: its expected
// wait is the time stalled so far plus the queue at the rate it had, so it
// grows with every read, and it finishes nothing meanwhile. Once it
// finishes calls again it is no longer stalled. (Before, the rate fell as
// the calls in flight over the time stalled, so a leader election of a
// few seconds read as a queue of a minute: TestClusterLeaderKills.)
func TestStalledPoolWaitGrowsEveryRead(t *testing.T) {
	p := &poolLoad{name: "native"}
	t0 := time.Unix(1000, 0)
	p.measure(0, 32, t0)
	at := feed(p, t0, 32, 300, 300, 300, 300) // 600 calls a second
	p.pending.Store(450)
	p.ackPending.Store(32)
	var last time.Duration
	for i := range 10 {
		at = feed(p, at, 32, 0)
		p.readAt.Store(at.UnixNano())
		e := p.estimate(0, at.Add(100*time.Millisecond), 500*time.Millisecond)
		stalled := time.Duration(i+1) * 500 * time.Millisecond
		// Stalled since the last read that found progress: the first
		// read without finds it stalled for one interval.
		if e.stalled != stalled+100*time.Millisecond {
			t.Fatalf("read %d: stalled %s, want %s", i, e.stalled, stalled+100*time.Millisecond)
		}
		if e.pending != 450 {
			t.Fatalf("read %d: a stalled pool finished calls between reads: %d pending, want 450", i, e.pending)
		}
		w := e.wait(e.pending)
		if w <= last || w < e.stalled+700*time.Millisecond || w > e.stalled+1100*time.Millisecond {
			t.Fatalf("read %d: expected wait %s (before %s), want the stall %s plus 450 calls at about 600 a second (the busiest rate, halving every 10s)", i, w, last, e.stalled)
		}
		last = w
	}
	feed(p, at, 32, 300)
	if e := p.estimate(0, at, 500*time.Millisecond); e.stalled != 0 {
		t.Fatalf("a pool that finishes calls again is still stalled %s", e.stalled)
	}
}

// A pool with free slots and one long call in flight is stalled (nothing
// finishes), but a call admitted now starts at once: with nothing queued
// the expected wait is zero, and the pool is not refused (review: wait(0)
// was the time stalled, so one 10s call refused every call of a fast
// pool past 2s).
func TestStalledPoolWithFreeSlotsAdmits(t *testing.T) {
	p := &poolLoad{name: "native", bound: -1}
	t0 := time.Unix(1000, 0)
	p.measure(0, 1, t0)
	at := feed(p, t0, 1, 5, 5, 5, 5) // 10 calls a second, about 100ms each
	at = feed(p, at, 1, 0, 0, 0, 0, 0, 0)
	p.readAt.Store(at.UnixNano())
	p.pending.Store(0)
	p.ackPending.Store(1)
	if e := p.estimate(0, at, 500*time.Millisecond); e.stalled < 2*time.Second || e.wait(e.pending) != 0 {
		t.Fatalf("stalled %s, wait %s: want stalled past 2s and no wait for a free slot", e.stalled, e.wait(e.pending))
	}
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}.WithDefaults()}
	if te, _, _ := v.checkPool(p, 0); te != nil {
		t.Fatalf("a pool with free slots refused a call: %s", te.GetMessage())
	}
}

// A call without a schedule-to-start is refused when its pool would start
// it after MaxQueueWait; with no bound (negative) it is admitted.
func TestDefaultQueueWaitBound(t *testing.T) {
	p := &poolLoad{name: "native", bound: -1}
	p.rate.Store(math.Float64bits(100)) // 100 calls a second
	p.pending.Store(2000)               // 20s of queue
	p.ackPending.Store(8)
	p.readAt.Store(time.Now().UnixNano())
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}.WithDefaults()}
	te, cause, _ := v.checkPool(p, 0)
	if te == nil || cause != "expected_wait" {
		t.Fatalf("20s of queue, default bound: %v %q", te, cause)
	}
	if ra := te.RetryAfter.AsDuration(); ra < 5*time.Second {
		t.Fatalf("retry_after %s, want about the 10s excess", ra)
	}
	if te, _, _ := v.checkPool(p, time.Minute); te != nil {
		t.Fatalf("a call with a schedule-to-start of 1m was refused: %s", te.Message)
	}
	v.cfg.MaxQueueWait = -1
	if te, _, _ := v.checkPool(p, 0); te != nil {
		t.Fatalf("no bound: refused %s", te.Message)
	}
}

// steady returns reads' worth of finished calls for a pool that finishes
// one call every `every`, read every 500ms.
func steady(reads int, every time.Duration) []uint64 {
	done := make([]uint64, reads)
	per := float64(500*time.Millisecond) / float64(every)
	for i := range done {
		done[i] = uint64(float64(i+1)*per) - uint64(float64(i)*per)
	}
	return done
}

// queued sets the last read of p to pending calls queued, now.
func queued(p *poolLoad, pending int64) {
	p.pending.Store(pending)
	p.ackPending.Store(8)
	p.readAt.Store(time.Now().UnixNano())
}

// The default bound on queue wait scales with the pool's own call time
// (QueueWaitRounds of it, at least MaxQueueWait): a pool of slow tools (8
// slots, 30s calls) queues a round of its calls, which 2s alone would
// refuse, and is refused past a few rounds; a fast pool (8 slots, 20ms
// calls) keeps 2s; a stall is not taken for slow calls.
func TestDefaultQueueWaitBoundScalesWithCallTime(t *testing.T) {
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}.WithDefaults()}
	t0 := time.Unix(1000, 0)

	slow := &poolLoad{name: "llm", bound: -1}
	slow.measure(0, 8, t0)
	feed(slow, t0, 8, steady(360, 30*time.Second/8)...) // 3 minutes
	if ct := time.Duration(slow.callTime.Load()); ct < 25*time.Second || ct > 40*time.Second {
		t.Fatalf("slow pool: call time %s, want about 30s", ct)
	}
	limit := v.waitLimit(slow, 0)
	if limit < 75*time.Second || limit > 120*time.Second {
		t.Fatalf("slow pool: bound %s, want about 90s (3 rounds of 30s)", limit)
	}
	queued(slow, 8) // one round queued: about 30s to start
	if te, _, _ := v.checkPool(slow, 0); te != nil {
		t.Fatalf("slow pool, one round queued: refused %s", te.Message)
	}
	queued(slow, 80) // ten rounds
	te, cause, _ := v.checkPool(slow, 0)
	if te == nil || cause != "expected_wait" {
		t.Fatalf("slow pool, ten rounds queued: %v %q", te, cause)
	}
	if want := "admitted for (" + limit.Round(time.Millisecond).String() + ")"; !strings.Contains(te.Message, want) {
		t.Fatalf("message %q does not name the bound %s", te.Message, limit)
	}

	fast := &poolLoad{name: "native", bound: -1}
	fast.measure(0, 8, t0)
	at := feed(fast, t0, 8, steady(20, time.Second/400)...)
	if ct := time.Duration(fast.callTime.Load()); ct < 15*time.Millisecond || ct > 25*time.Millisecond {
		t.Fatalf("fast pool: call time %s, want about 20ms", ct)
	}
	if limit := v.waitLimit(fast, 0); limit != DefaultMaxQueueWait {
		t.Fatalf("fast pool: bound %s, want %s", limit, DefaultMaxQueueWait)
	}
	queued(fast, 400) // 1s
	if te, _, _ := v.checkPool(fast, 0); te != nil {
		t.Fatalf("fast pool, 1s queued: refused %s", te.Message)
	}
	queued(fast, 1200) // 3s
	if te, _, _ := v.checkPool(fast, 0); te == nil {
		t.Fatal("fast pool, 3s queued: admitted")
	}

	feed(fast, at, 8, make([]uint64, 20)...) // 10s with nothing finished
	if limit := v.waitLimit(fast, 0); limit != DefaultMaxQueueWait {
		t.Fatalf("stalled fast pool: bound %s, want %s", limit, DefaultMaxQueueWait)
	}
}

// A pool's own bound on queue wait (PoolMaxQueueWait) replaces the
// default and does not scale; a call's schedule-to-start still replaces
// both.
func TestPoolQueueWaitBound(t *testing.T) {
	v := &Load{cfg: LoadConfig{Refresh: time.Hour, PoolMaxQueueWait: map[string]time.Duration{"llm": 5 * time.Second, "batch": -1}}.WithDefaults()}
	if err := (LoadConfig{Bus: &bus.Bus{}, PoolMaxQueueWait: map[string]time.Duration{"llm": 50 * time.Millisecond}}).WithDefaults().Validate(); err == nil ||
		!strings.Contains(err.Error(), "PoolMaxQueueWait[llm]") {
		t.Fatalf("50ms accepted: %v", err)
	}
	slow := &poolLoad{name: "llm", bound: -1, waitBound: v.cfg.queueWaitBound("llm")}
	slow.callTime.Store(int64(30 * time.Second))
	slow.rate.Store(math.Float64bits(8.0 / 30))
	queued(slow, 8) // 30s
	if te, _, _ := v.checkPool(slow, 0); te == nil {
		t.Fatal("30s of queue admitted by a pool bound of 5s")
	}
	if te, _, _ := v.checkPool(slow, time.Minute); te != nil {
		t.Fatalf("a schedule-to-start of 1m refused: %s", te.Message)
	}
	batch := &poolLoad{name: "batch", bound: -1, waitBound: v.cfg.queueWaitBound("batch")}
	batch.rate.Store(math.Float64bits(1))
	queued(batch, 3600)
	if te, _, _ := v.checkPool(batch, 0); te != nil {
		t.Fatalf("a pool with no bound refused: %s", te.Message)
	}
}

// An idle pool is not a slower one: a pool that ran 5,000 calls a second,
// then had nothing to do for a minute, then gets a burst of calls queued
// behind its slots drains them at about its rate, not at the rate
// forgotten over the idle minute (5,000 / 2^6, 78 a second, which refused
// a burst of 1,482 queued calls as "about 19s" of wait: make bench's
// sessions run at 1,024 in flight, whose warm-up followed a minute of
// opening sessions). Nor does the read that ends the first interval of the
// burst, which was idle until the burst came, show it slower: that read
// saw a part of an interval of work.
func TestIdlePoolDrainsABurstAtItsRate(t *testing.T) {
	p := &poolLoad{name: "native", bound: -1}
	t0 := time.Unix(1000, 0)
	p.measure(0, 64, t0)
	at := feed(p, t0, 64, 2500, 2500, 2500, 2500, 2500) // 5,000 calls a second
	at = feed(p, at, 0, make([]uint64, 120)...)         // a minute with nothing to do
	if r := rateOf(p); r < 4900 {
		t.Fatalf("after a minute idle the rate is %.0f, want the pool's 5000", r)
	}
	// The burst: 1,482 calls queued behind 64 in flight, and 50 more
	// finished in the moment between the burst and the read (114
	// delivered).
	p.pending.Store(1482)
	at = feed(p, at, 64, 114)
	p.readAt.Store(at.UnixNano())
	e := p.estimate(0, at, 500*time.Millisecond)
	if w := e.wait(e.pending); w > time.Second {
		t.Fatalf("a burst of 1482 calls on a 5000-a-second pool waits %s (rate %.0f): want well under a second", w, e.rate)
	}
	v := &Load{cfg: LoadConfig{Refresh: time.Hour}.WithDefaults()}
	p.readAt.Store(time.Now().UnixNano()) // admission judges it as read just now
	if te, _, _ := v.checkPool(p, 0); te != nil {
		t.Fatalf("a burst on an idle pool refused: %s", te.GetMessage())
	}
	// From the next read on the rate is measured again: a pool that
	// drains the burst at a tenth of its old rate is seen so.
	feed(p, at, 64, 250)
	if r := rateOf(p); r > 510 {
		t.Fatalf("a pool draining 500 calls a second is still seen at %.0f", r)
	}
}
