package poolview

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// rateWindow is the span over which a pool's drain rate is measured;
// rateShortWindow the shorter span whose rate, when lower, is the rate
// (a pool that slows down is seen slower within one read); rateHalfLife
// how fast its busiest rate is forgotten once nothing is in flight.
const (
	rateWindow      = 2 * time.Second
	rateShortWindow = 500 * time.Millisecond
	rateHalfLife    = 10 * time.Second
	// callTimeHalfLife is how fast a pool's call time forgets the calls
	// it measured: a minute, so that it covers a few calls of even a slow
	// tool (30s calls) and follows a tool that became slower or faster
	// within minutes.
	callTimeHalfLife = time.Minute
)

// poolLoad is one pool consumer's backlog and drain rate.
type poolLoad struct {
	name     string // the pool's name
	consumer string
	bound    int64 // -1 = none

	// Read by admission, written by the refresh.
	pending, ackPending atomic.Int64
	admitted            atomic.Int64  // by this replica, ever
	unsettled           atomic.Int64  // admitted by this replica, publish not yet answered
	admittedAtRead      atomic.Int64  // admitted and published when the last read was sent
	readAt              atomic.Int64  // when the last read was sent, Unix ns
	rate                atomic.Uint64 // float64 bits: calls/s it drains at (see measure); 0 = unknown
	callTime            atomic.Int64  // a call's typical time in flight, ns (see measure); 0 = unknown
	stalledAt           atomic.Int64  // stalled (see measure) since, Unix ns; 0 = not stalled
	// pause is the pool's pause as the last read found it (nil: never
	// read); a paused pool refuses every call (judgePool).
	pause atomic.Pointer[Pause]
	// waitBound is the pool's own bound on queue wait (LoadConfig.
	// PoolMaxQueueWait; -1 = none); 0 = the default, which scales with
	// callTime (Load.waitLimit).
	waitBound time.Duration

	// Refresh goroutine only.
	samples        []rateSample
	peak           float64
	lastDelivered  uint64
	lastAckPending int64
	lastPending    int64
	lastAt         time.Time
	// inFlightSum and doneSum are the pool's calls in flight integrated
	// over time (call-seconds) and its finished calls, both decayed with
	// callTimeHalfLife: their ratio is callTime (Little's law).
	inFlightSum, doneSum float64
	// progressAt is the last read that found a call finished since the
	// one before, or none in flight: a pool with calls in flight that
	// finishes none is stalled since then.
	progressAt time.Time
}

type rateSample struct {
	done float64
	dt   time.Duration
}

// published is how many calls this replica admitted to the pool and has
// published: the read that follows finds them in the consumer's figures.
// A call admitted but not yet stored is not among them, so it stays in
// the estimate's "admitted since" until the read after its publish; a
// call whose publish is answered between the two loads is counted twice
// until the next read (an overestimate, never an underestimate: the
// counters are loaded in the reverse order of admit's increments).
func (p *poolLoad) published() int64 {
	a := p.admitted.Load()
	return a - p.unsettled.Load()
}

// settle is called once the publish of a call admitted to p is answered
// (stored or not). p may be nil: the call was admitted to no pool.
func (p *poolLoad) settle() {
	if p != nil {
		p.unsettled.Add(-1)
	}
}

// measure updates the pool's drain rate from the consumer's delivered
// sequence and ack-pending count: calls finished since the last read are
// those delivered since, less the growth of those awaiting their ack (a
// redelivery counts as a finished call: a slight overestimate). The rate
// is conservative, for admission bounds a call's wait with it (doc.go,
// "Overload"): it falls as fast as the pool slows, and rises no faster
// than the pool is seen to finish calls.
//
//   - Calls finished in the last rateShortWindow: the lower of that
//     window's rate and rateWindow's. While the pool has a backlog, which
//     is when the estimate matters, that is its capacity, and a slowdown
//     shows within one read rather than after rateWindow.
//   - None finished in the short window, calls in flight (stalled: slow
//     calls, workers that stopped answering, or a stream electing a
//     leader): the rate it drains at once it resumes, the busiest rate
//     seen (decayed: below) or else the last, and the pool is stalled
//     since it last finished a call (stalledAt). A stall is not a slower
//     pool: its queued calls start after the stall, at the pool's rate,
//     so the expected wait is the time stalled so far (as long again is
//     the guess for what is left) plus the queue at that rate
//     (loadEstimate.wait), and grows with every read. Unknown (0) while
//     the pool never finished a call. (Before, the rate fell as the
//     calls in flight over the time stalled: 32 calls in flight stalled
//     for 5s by a leader election read as 6 calls a second, and a queue
//     of 450 that a 600-a-second pool works off in a second as 80s.)
//   - None finished, none in flight, calls queued (the workers gone):
//     the busiest rate seen, forgotten with rateHalfLife, so that a pool
//     that stopped draining looks slower and slower rather than unknown.
//   - Nothing to do (none delivered, none in flight and none queued at
//     this read and the one before): no sample, and the rate stands. An
//     idle pool is not a slower one: forgetting its rate while idle
//     judged a burst after a minute's rest at 1/64 of the pool's rate
//     and refused it (TestIdlePoolDrainsABurstAtItsRate). A read whose
//     interval began or ended so, with nothing in flight or queued,
//     measures how much work came rather than the rate: it may raise the
//     rate, never lower it; the next read of a busy pool measures it
//     again. A pool whose workers became slower while it was idle is so
//     seen one read (500ms) after the work came.
func (p *poolLoad) measure(delivered uint64, ackPending int64, now time.Time) {
	pending := p.pending.Load()
	defer func() {
		p.lastDelivered, p.lastAckPending, p.lastPending, p.lastAt = delivered, ackPending, pending, now
	}()
	if p.lastAt.IsZero() || delivered < p.lastDelivered {
		p.samples = p.samples[:0] // first read, or the consumer was made again
		p.progressAt = now
		p.stalledAt.Store(0)
		return
	}
	dt := now.Sub(p.lastAt)
	if dt <= 0 {
		return
	}
	done := max(float64(delivered-p.lastDelivered)-float64(ackPending-p.lastAckPending), 0)
	if done > 0 || ackPending == 0 {
		p.progressAt = now
	}
	beganIdle, endedIdle := p.lastAckPending == 0 && p.lastPending == 0, ackPending == 0 && pending == 0
	if beganIdle && endedIdle && delivered == p.lastDelivered {
		p.stalledAt.Store(0)
		return // nothing to do all along: not a slower pool
	}
	p.samples = append(p.samples, rateSample{done, dt})
	p.measureCallTime(done, ackPending, dt)
	long, short := p.windows()
	p.peak = max(p.peak*math.Exp2(-dt.Seconds()/rateHalfLife.Seconds()), long)
	if p.peak < 0.01 {
		p.peak = 0
	}
	last := math.Float64frombits(p.rate.Load())
	var rate float64
	var stalledAt int64
	switch {
	case short > 0:
		rate = min(long, short)
	case ackPending > 0:
		// Unknown until a call finished (0: the wait is not bounded by
		// it); progressAt is a read before this one.
		if rate = cmp.Or(p.peak, last); rate > 0 {
			stalledAt = p.progressAt.UnixNano()
		}
	default:
		rate = p.peak
	}
	if beganIdle || endedIdle {
		// Idle until the work came or once it was done: the calls it
		// finished show how much work came, not how fast the pool drains.
		rate = max(rate, last)
	}
	p.rate.Store(math.Float64bits(rate))
	p.stalledAt.Store(stalledAt)
}

// measureCallTime updates the pool's typical call time, the time a call
// spends in flight (taken by a worker, not yet acknowledged: its run), by
// Little's law: the calls in flight integrated over time over the calls
// finished, both decayed with callTimeHalfLife. The time in flight counts
// between two reads as the mean of their counts. It does
// not need the pool to be busy: the law holds at any load. It is updated
// only at a read that found calls finished, so that a stall (workers that
// stopped answering) is not taken for slow calls: while nothing finishes
// the call time stands and the drain rate falls, and the expected wait
// outgrows the bound. Idle time counts nothing. A call still in flight
// adds its time before it is counted as finished, so while the sums hold
// few calls the figure errs high, by at most one call of the pool's in
// flight over all it measured.
func (p *poolLoad) measureCallTime(done float64, ackPending int64, dt time.Duration) {
	decay := math.Exp2(-dt.Seconds() / callTimeHalfLife.Seconds())
	p.inFlightSum = p.inFlightSum*decay + float64(p.lastAckPending+ackPending)/2*dt.Seconds()
	p.doneSum = p.doneSum*decay + done
	if done > 0 && p.doneSum > 0 {
		p.callTime.Store(int64(p.inFlightSum / p.doneSum * float64(time.Second)))
	}
}

// windows returns the pool's finished calls a second over the last
// rateWindow (long) and rateShortWindow (short), dropping older samples.
func (p *poolLoad) windows() (long, short float64) {
	var sumDone float64
	var sumDT time.Duration
	shortDone := false
	for i := len(p.samples) - 1; i >= 0; i-- {
		sumDone, sumDT = sumDone+p.samples[i].done, sumDT+p.samples[i].dt
		if !shortDone && (sumDT >= rateShortWindow || i == 0) {
			short, shortDone = sumDone/sumDT.Seconds(), true
		}
		if sumDT >= rateWindow {
			p.samples = slices.Delete(p.samples, 0, i)
			break
		}
	}
	return sumDone / sumDT.Seconds(), short
}

// loadEstimate is a pool's load now.
type loadEstimate struct {
	// pending and backlog count this replica's admissions since the last
	// read; readPending and readBacklog do not.
	pending, backlog, readPending, readBacklog int64
	rate                                       float64
	// stalled is how long the pool has finished nothing with calls in
	// flight (measure); 0 = not stalled.
	stalled time.Duration
	// draining: the last read found at least a refresh interval's worth
	// of calls queued, so the pool stays busy until the next read and
	// drains at its capacity: the estimate can be trusted.
	draining bool
}

// wait is how long pending calls take to start: at the drain rate,
// after the stall (as long again as it lasted so far) if stalled and
// calls are queued. With none queued a call starts at once, stalled or
// not: the pool has a free slot (a stalled pool whose slots are all
// taken has calls queued behind them), and one long call in flight must
// not refuse calls the idle slots would run.
func (e loadEstimate) wait(pending int64) time.Duration {
	if e.rate <= 0 || pending <= 0 {
		return 0
	}
	return e.stalled + time.Duration(float64(pending)/e.rate*float64(time.Second))
}

// estimate returns the pool's calls queued and its backlog (queued and
// running) now, with admitted calls admitted by this replica so far: the
// last read, plus what this replica admitted since, less what the pool
// finished since at its drain rate. Without the last term a busy pool
// would look full between reads: a fast pool finishes many times its
// bound in one refresh interval.
func (p *poolLoad) estimate(admitted int64, now time.Time, refresh time.Duration) loadEstimate {
	e := loadEstimate{rate: math.Float64frombits(p.rate.Load())}
	since := max(admitted-p.admittedAtRead.Load(), 0)
	done := int64(e.rate * now.Sub(time.Unix(0, p.readAt.Load())).Seconds())
	if at := p.stalledAt.Load(); at != 0 {
		e.stalled, done = max(now.Sub(time.Unix(0, at)), 0), 0 // a stalled pool finishes nothing
	}
	pending, ackPending := p.pending.Load(), p.ackPending.Load()
	e.draining = e.rate > 0 && float64(pending) >= e.rate*refresh.Seconds()
	e.readPending, e.readBacklog = max(pending-done, 0), max(pending+ackPending-done, 0)
	e.pending, e.backlog = max(pending+since-done, 0), max(pending+ackPending+since-done, 0)
	return e
}
