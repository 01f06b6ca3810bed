package poolview

// What the dashboard and the metrics read of the view. The figures are
// the last read (every LoadConfig.Refresh), not a read of their own, so a
// dashboard adds no load on the server; Queued and InFlight are the
// consumer's NumPending and NumAckPending at that read (without this
// replica's admissions since, which the Backlog of the metrics adds).

import (
	"slices"
	"time"

	"github.com/toolwire/toolwire/internal/telemetry"
)

// PoolStatus is one worker pool as this replica last read it.
type PoolStatus struct {
	// Pool is the pool's name, Consumer its durable consumer of the calls
	// stream, Filters the call subjects it consumes.
	Pool, Consumer string
	Filters        []string
	// Queued is the calls no worker has taken yet (the consumer's
	// NumPending) and InFlight those taken and not yet acknowledged
	// (NumAckPending), at the last read.
	Queued, InFlight int64
	// Bound is the backlog past which admission refuses; -1 = none.
	Bound int64
	// DrainRate is the calls per second the pool finished lately (0 = not
	// measured yet) and ExpectedWait how long a call admitted now would
	// wait to start.
	DrainRate    float64
	ExpectedWait time.Duration
	// WaitBound is the longest expected wait a call without a
	// schedule-to-start is admitted for: the pool's own bound, or the
	// default scaled with CallTime (doc.go, "Overload"); 0 = none.
	// CallTime is the pool's typical call time, measured (0 = not yet).
	WaitBound, CallTime time.Duration
	// ReadAt is when the figures were read; zero = never.
	ReadAt time.Time
	// Pause is the pool's pause at the last read; nil before a read.
	Pause *Pause
}

// Pools returns the worker pools (the pool consumers of the calls
// stream) as the view last read them, sorted by consumer name; none
// before the first read.
func (l *Load) Pools() []PoolStatus {
	s := l.snap.Load()
	if s == nil {
		return nil
	}
	now := time.Now()
	out := make([]PoolStatus, 0, len(s.pools))
	for _, p := range s.pools {
		e := p.estimate(p.admitted.Load(), now, l.cfg.Refresh)
		ps := PoolStatus{Pool: p.name, Consumer: p.consumer, Filters: slices.Clone(p.filters),
			Queued: p.pending.Load(), InFlight: p.ackPending.Load(), Bound: p.bound,
			DrainRate: e.rate, ExpectedWait: e.wait(e.pending), WaitBound: l.waitLimit(p.poolLoad, 0), CallTime: time.Duration(p.callTime.Load())}
		if at := p.readAt.Load(); at != 0 {
			ps.ReadAt = time.Unix(0, at)
		}
		ps.Pause = p.pause.Load()
		out = append(out, ps)
	}
	return out
}

// Stores returns the use of the layout's stores (and of the JetStream
// account, named "account") at the last read.
func (l *Load) Stores() []telemetry.StoreLoad {
	_, stores := l.Metrics()
	return stores
}

// PoolOf returns the name of the pool that consumes calls on subject, as
// Check routes them (the pool consumers' filters at the last read); ""
// when no pool does.
func (l *Load) PoolOf(subject string) string {
	s := l.snap.Load()
	if s == nil {
		return ""
	}
	if p := s.route(subject); p != nil {
		return p.name
	}
	return ""
}

// Metrics returns the view for the metrics, read at scrape time
// (telemetry.DispatcherMetrics.ObserveLoad).
func (l *Load) Metrics() ([]telemetry.PoolLoad, []telemetry.StoreLoad) {
	s := l.snap.Load()
	if s == nil {
		return nil, nil
	}
	pools := make([]telemetry.PoolLoad, 0, len(s.pools))
	for _, p := range s.pools {
		e := p.estimate(p.admitted.Load(), time.Now(), l.cfg.Refresh)
		pools = append(pools, telemetry.PoolLoad{Pool: p.name, Backlog: e.backlog, Bound: p.bound, DrainRate: e.rate, ExpectedWait: e.wait(e.pending)})
	}
	stores := make([]telemetry.StoreLoad, 0, len(s.stores))
	for _, u := range s.stores {
		stores = append(stores, telemetry.StoreLoad{Store: u.Name, Bytes: u.bytes, MaxBytes: u.MaxBytes})
	}
	return pools, stores
}
