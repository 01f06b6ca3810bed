package poolview

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// rateWindow is the span over which a pool's drain rate is measured, and
// rateHalfLife how fast its busiest rate is forgotten.
const (
	rateWindow   = 2 * time.Second
	rateHalfLife = 10 * time.Second
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

	// Refresh goroutine only.
	samples        []rateSample
	peak           float64
	lastDelivered  uint64
	lastAckPending int64
	lastAt         time.Time
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
// is the mean over the last rateWindow: while the pool has a backlog,
// which is when the estimate matters, that is its capacity. When nothing
// finished in the window it is the busiest window seen, forgotten with
// rateHalfLife, so that a pool that stopped draining (its workers gone)
// looks slower and slower rather than unknown.
func (p *poolLoad) measure(delivered uint64, ackPending int64, now time.Time) {
	defer func() { p.lastDelivered, p.lastAckPending, p.lastAt = delivered, ackPending, now }()
	if p.lastAt.IsZero() || delivered < p.lastDelivered {
		p.samples = p.samples[:0] // first read, or the consumer was made again
		return
	}
	dt := now.Sub(p.lastAt)
	if dt <= 0 {
		return
	}
	done := max(float64(delivered-p.lastDelivered)-float64(ackPending-p.lastAckPending), 0)
	p.samples = append(p.samples, rateSample{done, dt})
	var sumDone float64
	var sumDT time.Duration
	for i := len(p.samples) - 1; i >= 0; i-- {
		sumDone, sumDT = sumDone+p.samples[i].done, sumDT+p.samples[i].dt
		if sumDT >= rateWindow {
			p.samples = slices.Delete(p.samples, 0, i)
			break
		}
	}
	window := sumDone / sumDT.Seconds()
	p.peak = max(p.peak*math.Exp2(-dt.Seconds()/rateHalfLife.Seconds()), window)
	if p.peak < 0.01 {
		p.peak = 0
	}
	rate := window
	if rate == 0 {
		rate = p.peak
	}
	p.rate.Store(math.Float64bits(rate))
}

// loadEstimate is a pool's load now.
type loadEstimate struct {
	// pending and backlog count this replica's admissions since the last
	// read; readPending and readBacklog do not.
	pending, backlog, readPending, readBacklog int64
	rate                                       float64
	// draining: the last read found at least a refresh interval's worth
	// of calls queued, so the pool stays busy until the next read and
	// drains at its capacity: the estimate can be trusted.
	draining bool
}

// wait is how long pending calls take to start at the drain rate.
func (e loadEstimate) wait(pending int64) time.Duration {
	if e.rate <= 0 {
		return 0
	}
	return time.Duration(float64(pending) / e.rate * float64(time.Second))
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
	pending, ackPending := p.pending.Load(), p.ackPending.Load()
	e.draining = e.rate > 0 && float64(pending) >= e.rate*refresh.Seconds()
	e.readPending, e.readBacklog = max(pending-done, 0), max(pending+ackPending-done, 0)
	e.pending, e.backlog = max(pending+since-done, 0), max(pending+ackPending+since-done, 0)
	return e
}
