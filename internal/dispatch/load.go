package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Explicit overload: admission refuses a call with OVERLOADED, before
// anything is queued, when its pool's backlog is at its bound, when the
// pool would start it only after its schedule-to-start, or when a store
// the call writes is nearly full. See doc.go, "Overload".
//
// Admission never asks the server: it reads loadView, a cached view that
// one goroutine refreshes every Config.LoadRefresh (one consumer listing
// of the calls stream) and, every storeRefresh, the use of every store
// (one stream info each and the account's info). Between refreshes a
// pool's backlog is estimated (poolLoad.estimate), and a refusal the
// estimate alone cannot carry waits for a fresh read (check); other
// replicas' admissions since the last read are what it cannot see.

// storeRefresh is how often the stores' use is read: stores fill over
// minutes, pools over seconds.
const storeRefresh = 2 * time.Second

// rateWindow is the span over which a pool's drain rate is measured, and
// rateHalfLife how fast its busiest rate is forgotten.
const (
	rateWindow   = 2 * time.Second
	rateHalfLife = 10 * time.Second
)

// Bounds of a refusal's retry_after.
const (
	minRetryAfter   = time.Second
	maxRetryAfter   = time.Minute
	storeRetryAfter = 30 * time.Second
)

// loadView is the dispatcher's cached view of what admission must not
// overrun. Admission reads it lock-free (check); the refresh goroutine
// alone writes it.
type loadView struct {
	d *Dispatcher

	snap atomic.Pointer[loadSnap]
	// kick asks for a read before the next tick (admission, before a
	// refusal that rests on its own admissions since the last read; never
	// blocking), and refreshed is the last read done: its done is closed
	// when the next one is.
	kick      chan struct{}
	refreshed atomic.Pointer[refreshGen]

	// Refresh goroutine only (and start, before it runs).
	pools      map[string]*poolLoad // by consumer name
	filters    map[string][]string  // by consumer name
	streams    map[string]jetstream.Stream
	storesAt   time.Time
	stores     []storeUse
	failing    bool // the last refresh failed (logged once per streak)
	stop       context.CancelFunc
	done       chan struct{}
	poolPrefix string
}

// refreshGen is one read of the view.
type refreshGen struct {
	at   time.Time     // when it was done
	done chan struct{} // closed when the next read is done
}

// loadSnap is one refresh's view; replaced whole, never modified.
type loadSnap struct {
	pools  []poolRoute
	routes *routeCache // shared by snapshots with the same pools and filters
	stores []storeUse
	// full is a store every call may write that is past the high-water
	// mark; keyedFull one that calls with an idempotency key write.
	full, keyedFull *storeUse
}

// storeUse is one store's use at the last read.
type storeUse struct {
	bus.Store
	bytes int64
	// account marks the JetStream account's own limit, not a store.
	account bool
}

// poolRoute is a pool and its consumer's filters at one refresh.
type poolRoute struct {
	*poolLoad
	filters []string
}

// routeCache maps call subjects to their pool (nil: none); it stops
// growing at maxRoutes (subjects carry the tenant).
type routeCache struct {
	m sync.Map
	n atomic.Int64
}

const maxRoutes = 100000

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

func newLoadView(d *Dispatcher) *loadView {
	v := &loadView{d: d, kick: make(chan struct{}, 1), pools: map[string]*poolLoad{}, filters: map[string][]string{}, streams: map[string]jetstream.Stream{},
		poolPrefix: strings.TrimSuffix(d.bus.Config.PoolConsumer("x"), "x")}
	v.refreshed.Store(&refreshGen{done: make(chan struct{})})
	return v
}

// start reads the view once, so that the first calls are checked too, and
// starts the refresh goroutine; stopRefresh ends it.
func (v *loadView) start(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	v.refresh(rctx, time.Now())
	cancel()
	ctx, v.stop = context.WithCancel(context.Background())
	v.done = make(chan struct{})
	go func() {
		defer close(v.done)
		v.run(ctx)
	}()
	return nil
}

// stopRefresh tells the refresh goroutine to stop and returns a channel
// closed once it has.
func (v *loadView) stopRefresh() <-chan struct{} {
	if v.stop == nil {
		return startstop.Closed
	}
	v.stop()
	return v.done
}

func (v *loadView) run(ctx context.Context) {
	t := time.NewTicker(v.d.cfg.LoadRefresh)
	defer t.Stop()
	last := time.Now()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		case <-v.kick:
			if early := minKickInterval - time.Since(last); early > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(early):
				}
			}
			now = time.Now()
		}
		rctx, cancel := context.WithTimeout(ctx, max(v.d.cfg.LoadRefresh, 2*time.Second))
		v.refresh(rctx, now)
		cancel()
		last = time.Now()
	}
}

// minKickInterval is the shortest time between two reads asked for by
// admission (kick): at most 50 a second per replica.
const minKickInterval = 20 * time.Millisecond

// refresh reads the pool consumers (and, when due, the stores) and
// publishes a new snapshot. A failed read keeps the previous figures, and
// the estimates go on from them.
func (v *loadView) refresh(ctx context.Context, now time.Time) {
	err := v.readPools(ctx)
	if now.Sub(v.storesAt) >= storeRefresh {
		if serr := v.readStores(ctx); serr == nil {
			v.storesAt = now
		} else {
			err = errors.Join(err, serr)
		}
	}
	switch {
	case err != nil && !v.failing && ctx.Err() == nil:
		v.d.log.Warn("reading pool backlogs and store use failed; admission uses the last figures", "err", err)
		v.failing = true
	case err == nil && v.failing:
		v.d.log.Info("reading pool backlogs and store use works again")
		v.failing = false
	}
	v.publish()
	close(v.refreshed.Swap(&refreshGen{at: time.Now(), done: make(chan struct{})}).done)
}

// readPools lists the pool consumers of the calls stream.
func (v *loadView) readPools(ctx context.Context) error {
	bases := make(map[string]int64, len(v.pools))
	for name, p := range v.pools {
		bases[name] = p.published()
	}
	sent := time.Now()
	seen := map[string]bool{}
	lister := v.d.bus.Calls.ListConsumers(ctx)
	for ci := range lister.Info() {
		if !strings.HasPrefix(ci.Name, v.poolPrefix) {
			continue // audits, replays: they deliver to no worker
		}
		seen[ci.Name] = true
		p := v.pools[ci.Name]
		if p == nil {
			name := strings.TrimPrefix(ci.Name, v.poolPrefix)
			p = &poolLoad{name: name, consumer: ci.Name, bound: v.d.cfg.backlogBound(name)}
			v.pools[ci.Name] = p
		}
		v.filters[ci.Name] = bus.ConsumerFilters(ci.Config)
		p.pending.Store(int64(ci.NumPending))
		p.ackPending.Store(int64(ci.NumAckPending))
		p.admittedAtRead.Store(bases[ci.Name])
		p.readAt.Store(sent.UnixNano())
		p.measure(ci.Delivered.Consumer, int64(ci.NumAckPending), sent)
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list pool consumers: %w", err)
	}
	for name := range v.pools {
		if !seen[name] {
			delete(v.pools, name) // deleted pool
			delete(v.filters, name)
		}
	}
	return nil
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

// readStores reads the use of every store and of the account.
func (v *loadView) readStores(ctx context.Context) error {
	var errs []error
	var uses []storeUse
	for _, s := range v.d.bus.Config.Stores() {
		st := v.streams[s.Stream]
		if st == nil {
			var err error
			if st, err = v.d.bus.JS.Stream(ctx, s.Stream); err != nil {
				errs = append(errs, fmt.Errorf("stream %s: %w", s.Stream, err))
				continue
			}
			v.streams[s.Stream] = st
		}
		info, err := st.Info(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", s.Stream, err))
			continue
		}
		// The live limit: an operator may have changed it since start-up.
		s.MaxBytes = info.Config.MaxBytes
		uses = append(uses, storeUse{Store: s, bytes: int64(info.State.Bytes)})
	}
	if ai, err := v.d.bus.JS.AccountInfo(ctx); err != nil {
		errs = append(errs, fmt.Errorf("account info: %w", err))
	} else if ai.Limits.MaxStore > 0 {
		uses = append(uses, storeUse{Store: bus.Store{Name: "account", Stream: "(account)", MaxBytes: ai.Limits.MaxStore, Use: bus.UsedByEveryCall},
			bytes: int64(ai.Store), account: true})
	}
	if len(uses) > 0 || len(errs) == 0 {
		v.stores = uses
	}
	return errors.Join(errs...)
}

// publish makes the current figures the snapshot admission reads.
func (v *loadView) publish() {
	s := &loadSnap{stores: v.stores}
	for name, p := range v.pools {
		s.pools = append(s.pools, poolRoute{p, v.filters[name]})
	}
	slices.SortFunc(s.pools, func(a, b poolRoute) int { return strings.Compare(a.consumer, b.consumer) })
	s.routes = &routeCache{}
	if old := v.snap.Load(); old != nil && slices.EqualFunc(old.pools, s.pools, func(x, y poolRoute) bool {
		return x.poolLoad == y.poolLoad && slices.Equal(x.filters, y.filters)
	}) {
		s.routes = old.routes
	}
	hw := v.d.cfg.StoreHighWater
	for i := range s.stores {
		u := &s.stores[i]
		// Only a store that refuses writes when full (discard new: calls,
		// idempotency keys) refuses admission as it fills. A discard-old
		// store (results, events, retries) drops its oldest messages and
		// never blocks a write; refusing calls until its oldest messages
		// aged out would refuse every call for days (events are kept 72 h).
		if !u.DiscardNew || u.MaxBytes <= 0 || float64(u.bytes) < hw*float64(u.MaxBytes) {
			continue
		}
		switch {
		case u.Use == bus.UsedByEveryCall && s.full == nil:
			s.full = u
		case u.Use == bus.UsedByKeyedCalls && s.keyedFull == nil:
			s.keyedFull = u
		}
	}
	v.snap.Store(s)
}

// route returns the pool whose consumer filters subject, or nil.
func (s *loadSnap) route(subject string) *poolLoad {
	if p, ok := s.routes.m.Load(subject); ok {
		return p.(*poolLoad)
	}
	var found *poolLoad
	for _, p := range s.pools {
		if slices.ContainsFunc(p.filters, func(f string) bool { return bus.SubjectMatches(f, subject) }) {
			found = p.poolLoad
			break
		}
	}
	if s.routes.n.Add(1) <= maxRoutes {
		s.routes.m.Store(subject, found)
	}
	return found
}

// check decides whether a call on subject may be admitted: the pool it
// is counted against (nil: none; settle it once its publish is answered),
// or the OVERLOADED refusal and which cause and target it was about. s2s
// is the call's schedule-to-start (0 = none); keyed says it has an
// idempotency key.
func (v *loadView) check(ctx context.Context, subject string, keyed bool, s2s time.Duration) (admitted *poolLoad, te *toolwirev1.ToolError, cause, target string) {
	s := v.snap.Load()
	if s == nil {
		return nil, nil, "", ""
	}
	if u := s.full; u != nil || keyed && s.keyedFull != nil {
		if u == nil {
			u = s.keyedFull
		}
		return nil, v.d.storeRefusal(u), telemetry.OverloadStore, u.Name
	}
	p := s.route(subject)
	if p == nil {
		return nil, nil, "", ""
	}
	te, cause, local := v.checkPool(p, s2s)
	if te == nil {
		return p, nil, "", ""
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
		g := v.refreshed.Load()
		select {
		case v.kick <- struct{}{}:
		default:
		}
		t := time.NewTimer(confirmWait)
		select {
		case <-g.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if te, cause, _ = v.checkPool(p, s2s); te == nil {
			return p, nil, "", ""
		}
	}
	return nil, te, cause, p.name
}

// confirmWait bounds the wait for a fresh read before a refusal.
const confirmWait = time.Second

// checkPool is check for pool p with the figures at hand: nil, and the
// call is counted against p, or the refusal, its cause, and whether it
// needs a fresh read (local): the last read alone would have admitted the
// call, and the pool had less than a refresh interval's worth of calls
// queued then, so its drain rate may be below what it finishes now.
func (v *loadView) checkPool(p *poolLoad, s2s time.Duration) (te *toolwirev1.ToolError, cause string, local bool) {
	// Counted first, so that concurrent admissions never all pass at
	// bound-1; given back on refusal. Unsettled before admitted, and given
	// back after it: see published.
	p.unsettled.Add(1)
	n := p.admitted.Add(1)
	e := p.estimate(n-1, time.Now(), v.d.cfg.LoadRefresh)
	if p.bound >= 0 && e.backlog >= p.bound {
		p.admitted.Add(-1)
		p.unsettled.Add(-1)
		after := minRetryAfter
		if e.rate > 0 {
			after = time.Duration(float64(e.backlog-p.bound+1) / e.rate * float64(time.Second))
		}
		te := overloaded(fmt.Sprintf("pool %s has %d calls queued or running, at its bound of %d", p.name, e.backlog, p.bound), after)
		te.Suggestion = "retry after retry_after; the pool needs more workers, or a larger bound (--pool-max-backlog)"
		return te, telemetry.OverloadBacklog, e.readBacklog < p.bound && !e.draining
	}
	if s2s > 0 && e.rate > 0 {
		// Refused past 90% of the schedule-to-start: the rest is headroom
		// for the estimate's error, so that an accepted call starts in time.
		limit := s2s * 9 / 10
		if wait := e.wait(e.pending); wait > limit {
			p.admitted.Add(-1)
			p.unsettled.Add(-1)
			te := overloaded(fmt.Sprintf("pool %s would start this call in about %s, after its schedule-to-start of %s (%d calls queued, finishing about %.0f a second)",
				p.name, wait.Round(time.Millisecond), s2s, e.pending, e.rate), wait-limit)
			te.Suggestion = "retry after retry_after, or allow a longer schedule_to_start"
			return te, telemetry.OverloadExpectedWait, e.wait(e.readPending) <= limit && !e.draining
		}
	}
	return nil, "", false
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
// bound in one LoadRefresh.
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

// storeRefusal is the OVERLOADED answer to a call that would write a
// nearly full store.
func (d *Dispatcher) storeRefusal(u *storeUse) *toolwirev1.ToolError {
	pct := int(math.Round(100 * float64(u.bytes) / float64(u.MaxBytes)))
	hw := int(math.Round(100 * d.cfg.StoreHighWater))
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

// metrics returns the view for the metrics (read at scrape time).
func (v *loadView) metrics() ([]telemetry.PoolLoad, []telemetry.StoreLoad) {
	s := v.snap.Load()
	if s == nil {
		return nil, nil
	}
	pools := make([]telemetry.PoolLoad, 0, len(s.pools))
	for _, p := range s.pools {
		e := p.estimate(p.admitted.Load(), time.Now(), v.d.cfg.LoadRefresh)
		pools = append(pools, telemetry.PoolLoad{Pool: p.name, Backlog: e.backlog, Bound: p.bound, DrainRate: e.rate, ExpectedWait: e.wait(e.pending)})
	}
	stores := make([]telemetry.StoreLoad, 0, len(s.stores))
	for _, u := range s.stores {
		stores = append(stores, telemetry.StoreLoad{Store: u.Name, Bytes: u.bytes, MaxBytes: u.MaxBytes})
	}
	return pools, stores
}

// scheduleToStart is how long call may wait to start from now; 0 = no
// bound.
func scheduleToStart(call *toolwirev1.ToolCall, now time.Time) time.Duration {
	if dl := call.GetScheduleToStartDeadline(); dl != nil {
		return max(dl.AsTime().Sub(now), time.Nanosecond)
	}
	return 0
}
