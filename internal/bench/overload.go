package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// OverloadConfig configures MeasureOverload.
type OverloadConfig struct {
	// Config gives the server's store (TempDir, Sync), Conn and Logger.
	Config
	// Service is how long each call runs (the built-in sleep tool).
	// Default 20ms.
	Service time.Duration
	// Concurrency is the pool's slots: its capacity is about
	// Concurrency/Service calls a second. Default 8.
	Concurrency int
	// Factor is the offered load during the overload, in multiples of the
	// measured capacity. Default 10.
	Factor float64
	// For is how long the overload lasts. Default 60s.
	For time.Duration
	// Recovery is how long the light load after it lasts. Default 15s.
	Recovery time.Duration
	// Baseline is how long the capacity and the baseline phases each
	// last. Default 5s.
	Baseline time.Duration
	// ScheduleToStart of every call. Default 2s; negative = none.
	ScheduleToStart time.Duration
	// MaxBacklog is the dispatcher's pool backlog bound; 0 = its default
	// (10000), -1 = no bound.
	MaxBacklog int
}

// WithDefaults returns a copy with zero fields set.
func (c OverloadConfig) WithDefaults() OverloadConfig {
	c.Config.Path = cmp.Or(c.Config.Path, PathNATS)
	c.Config = c.Config.WithDefaults()
	c.Service = cmp.Or(c.Service, 20*time.Millisecond)
	c.Concurrency = cmp.Or(c.Concurrency, 8)
	c.Factor = cmp.Or(c.Factor, 10)
	c.For = cmp.Or(c.For, 60*time.Second)
	c.Recovery = cmp.Or(c.Recovery, 15*time.Second)
	c.Baseline = cmp.Or(c.Baseline, 5*time.Second)
	if c.ScheduleToStart == 0 {
		c.ScheduleToStart = 2 * time.Second
	}
	return c
}

// Validate names the first invalid field.
func (c OverloadConfig) Validate() error {
	switch {
	case c.Service < time.Millisecond:
		return fmt.Errorf("bench: overload Service %s is below 1ms", c.Service)
	case c.Concurrency < 1:
		return fmt.Errorf("bench: overload Concurrency %d must be positive", c.Concurrency)
	case c.Factor <= 1:
		return fmt.Errorf("bench: overload Factor %g must be above 1", c.Factor)
	case c.For < time.Second || c.Recovery < time.Second || c.Baseline < time.Second:
		return errors.New("bench: overload For, Recovery and Baseline must be at least 1s")
	}
	return c.Config.Validate()
}

// overloadConns is the idle HTTP/1.1 connections the overload client
// keeps (-path http).
const overloadConns = 4096

// The phases of an overload measurement.
const (
	phaseCapacity = iota // closed loop: the pool's capacity
	phaseBaseline        // half the capacity: latency unloaded
	phaseOverload        // Factor times the capacity
	phaseRecovery        // half the capacity again
	phases
)

var phaseNames = [phases]string{"capacity", "baseline", "overload", "recovery"}

// Outcomes of one call of an overload measurement.
const (
	outcomeOK         = "ok"
	outcomeOverloaded = "overloaded"
	outcomeExpired    = "expired" // accepted, but not started within its schedule-to-start
	outcomePending    = "pending" // no answer within the wait
)

// callRecord is one call of an overload measurement.
type callRecord struct {
	phase   int
	sent    time.Time
	took    time.Duration // until its answer
	queued  time.Duration // accepted → started, for calls that ran
	outcome string
}

// PhaseStats are the figures of one phase.
type PhaseStats struct {
	// Offered is the calls sent a second (measured for the capacity phase).
	Offered float64
	// Sent, and by outcome.
	Sent     int
	Outcomes map[string]int
	// OK latency (send → answer) and queue wait (accepted → started) of
	// calls that ran.
	P50, P99, Max, QueueP99, QueueMax time.Duration
	// RefusalP50 and RefusalP99: send → OVERLOADED answer.
	RefusalP50, RefusalP99 time.Duration
	// HeapPeak is the process's peak heap in use (every part runs in this
	// process), GoroutinesPeak its peak goroutines, BacklogPeak the pool
	// consumer's peak NumPending + NumAckPending (sampled every 100ms).
	HeapPeak uint64
	// HeapLive is the heap still in use after a collection at the end of
	// the phase (its calls answered for the baseline and recovery, still
	// in flight for the overload).
	HeapLive       uint64
	GoroutinesPeak int
	BacklogPeak    uint64
}

// OverloadResult is one overload measurement.
type OverloadResult struct {
	Config OverloadConfig
	// Capacity is the pool's measured calls a second.
	Capacity float64
	Phases   [phases]PhaseStats
	// Recovered is when, after the overload ended, the latency of accepted
	// calls came back under RecoveryLimit for good (by send time, in 1s
	// windows, p99); -1 = never within the recovery phase.
	Recovered, RecoveryLimit time.Duration
	// CallsStreamBytes is the calls stream's size at the end.
	CallsStreamBytes uint64
}

// MeasureOverload offers a pool Factor times its capacity for For and
// reports what was accepted, refused, run in time, and how fast latency
// recovered; see doc.go, "Overload".
func MeasureOverload(ctx context.Context, oc OverloadConfig, progress io.Writer) (r OverloadResult, err error) {
	oc = oc.WithDefaults()
	if err := oc.Validate(); err != nil {
		return r, err
	}
	r.Config = oc
	// Over HTTP/1.1 the client keeps a connection alive for every call in
	// flight, as a caller's keep-alive pool does, rather than dial one per
	// call: thousands a second would exhaust the process's descriptors
	// (client and server run in this process).
	oc.InFlight = max(oc.InFlight, overloadConns)
	e, err := startEnv(ctx, oc.Config)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	s, err := startStack(ctx, e, stackOptions{worker: oc.Concurrency, maxBacklog: oc.MaxBacklog, http: oc.Path == PathHTTP})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, s.stop()) }()
	pool, err := s.bus.Calls.Consumer(ctx, s.bus.Config.PoolConsumer("native"))
	if err != nil {
		return r, err
	}
	// The worker's start-up window (worker.ClockSkew) is not measured.
	select {
	case <-time.After(time.Until(s.warmUntil)):
	case <-ctx.Done():
		return r, ctx.Err()
	}

	m := &overloadRun{s: s, oc: oc, args: fmt.Sprintf(`{"duration":%q}`, oc.Service.String())}
	sctx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { m.sample(sctx, pool) })
	defer func() {
		stopSampling()
		sampling.Wait()
	}()

	m.setPhase(phaseCapacity)
	r.Capacity = m.closedLoop(ctx, 4*oc.Concurrency, oc.Baseline)
	if r.Capacity <= 0 {
		return r, errors.New("bench: overload: the pool finished no call")
	}
	fmt.Fprintf(progress, "# capacity: %.0f calls/s\n", r.Capacity)
	m.setPhase(phaseBaseline)
	m.offer(ctx, r.Capacity/2, oc.Baseline)
	m.wg.Wait() // the baseline measures an unloaded pool
	m.setPhase(phaseOverload)
	fmt.Fprintf(progress, "# overload: %.0f calls/s for %s\n", oc.Factor*r.Capacity, oc.For)
	stopProfile, err := startProfile(oc.CPUProfile, oc.MemProfile) // the overload phase's
	if err != nil {
		return r, err
	}
	m.offer(ctx, oc.Factor*r.Capacity, oc.For)
	end := time.Now()
	if err := stopProfile(); err != nil {
		return r, err
	}
	m.setPhase(phaseRecovery)
	m.offer(ctx, r.Capacity/2, oc.Recovery)
	m.wg.Wait()
	m.live[phaseRecovery] = liveHeap()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	stopSampling()
	sampling.Wait()
	if info, err := s.bus.Calls.Info(ctx); err == nil {
		r.CallsStreamBytes = info.State.Bytes
	}
	m.summarise(&r, end)
	return r, nil
}

// overloadRun is one overload measurement in progress.
type overloadRun struct {
	s    *stack
	oc   OverloadConfig
	args string
	wg   sync.WaitGroup

	mu      sync.Mutex
	phase   int
	records []callRecord // every call but the refused ones
	refused [phases][]time.Duration
	peaks   [phases]struct {
		heap       uint64
		goroutines int
		backlog    uint64
	}
	capacityDone int
	live         [phases]uint64 // HeapLive; written by the measuring goroutine only
}

// liveHeap collects and returns the heap in use.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func (m *overloadRun) setPhase(p int) {
	if p > phaseCapacity {
		m.live[p-1] = liveHeap()
	}
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

// closedLoop runs n callers back to back for d and returns the calls
// finished a second.
func (m *overloadRun) closedLoop(ctx context.Context, n int, d time.Duration) float64 {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := m.s.d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: m.args}, callWait)
				if err == nil && resp.Response.GetOk() {
					m.mu.Lock()
					m.capacityDone++
					m.mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return float64(m.capacityDone) / time.Since(start).Seconds()
}

// offer sends rate calls a second for d, open loop: each call on its own
// goroutine, whatever the answers.
func (m *overloadRun) offer(ctx context.Context, rate float64, d time.Duration) {
	start := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			el := now.Sub(start)
			if el >= d {
				return
			}
			for due := int(rate * el.Seconds()); sent < due; sent++ {
				m.wg.Go(func() { m.one(ctx) })
			}
		}
	}
}

// one makes one call and records it.
func (m *overloadRun) one(ctx context.Context) {
	m.mu.Lock()
	phase := m.phase
	m.mu.Unlock()
	req := &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: m.args}
	if m.oc.ScheduleToStart > 0 {
		req.ScheduleToStart = durationpb.New(m.oc.ScheduleToStart)
	}
	rec := callRecord{phase: phase, sent: time.Now(), queued: -1}
	// Long enough for the longest backlog an unbounded pool could build:
	// (Factor-1)·For of work, drained at half the capacity while the
	// recovery load goes on.
	resp, err := m.call(ctx, req, time.Duration(2*m.oc.Factor)*m.oc.For+callWait)
	rec.took = time.Since(rec.sent)
	switch {
	case err != nil:
		rec.outcome = "error: " + err.Error()
	case resp.State != toolwirev1.CallState_CALL_STATE_DONE:
		rec.outcome = outcomePending
	case resp.Response.GetOk():
		rec.outcome = outcomeOK
	case resp.Response.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED:
		rec.outcome = outcomeOverloaded
	case resp.Response.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_EXPIRED:
		rec.outcome = outcomeExpired
	default:
		rec.outcome = resp.Response.GetError().GetType().String()
	}
	if meta := resp.GetResponse().GetMeta(); rec.outcome == outcomeOK && meta.GetStartedAt() != nil {
		rec.queued = meta.GetStartedAt().AsTime().Sub(meta.GetAcceptedAt().AsTime())
	}
	m.mu.Lock()
	if rec.outcome == outcomeOverloaded { // most calls: kept small
		m.refused[phase] = append(m.refused[phase], rec.took)
	} else {
		m.records = append(m.records, rec)
	}
	m.mu.Unlock()
}

// call makes one call through the dispatcher's API (Config.Path http: a
// Connect client over loopback HTTP, the server as dispatchd serves it)
// or in process, waiting for its result for at most wait.
func (m *overloadRun) call(ctx context.Context, req *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	if m.oc.Path != PathHTTP {
		return m.s.d.Call(ctx, identity.Default, req, wait)
	}
	req.Wait = durationpb.New(wait)
	resp, err := m.s.client.Call(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// sample records the peaks of each phase every 100ms.
func (m *overloadRun) sample(ctx context.Context, pool jetstream.Consumer) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var ms runtime.MemStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runtime.ReadMemStats(&ms)
		g := runtime.NumGoroutine()
		var backlog uint64
		if ci, err := pool.Info(ctx); err == nil {
			backlog = ci.NumPending + uint64(ci.NumAckPending)
		}
		m.mu.Lock()
		pk := &m.peaks[m.phase]
		pk.heap, pk.goroutines, pk.backlog = max(pk.heap, ms.HeapInuse), max(pk.goroutines, g), max(pk.backlog, backlog)
		m.mu.Unlock()
	}
}

// summarise fills r from the records; end is when the overload ended.
func (m *overloadRun) summarise(r *OverloadResult, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ok, queued [phases][]time.Duration
	refused := m.refused
	for p := range phases {
		if n := len(refused[p]); n > 0 {
			if r.Phases[p].Outcomes == nil {
				r.Phases[p].Outcomes = map[string]int{}
			}
			r.Phases[p].Sent += n
			r.Phases[p].Outcomes[outcomeOverloaded] = n
		}
	}
	for _, rec := range m.records {
		ps := &r.Phases[rec.phase]
		ps.Sent++
		if ps.Outcomes == nil {
			ps.Outcomes = map[string]int{}
		}
		ps.Outcomes[rec.outcome]++
		switch rec.outcome {
		case outcomeOK:
			ok[rec.phase] = append(ok[rec.phase], rec.took)
			queued[rec.phase] = append(queued[rec.phase], rec.queued)
		}
	}
	r.Phases[phaseCapacity].Offered = r.Capacity
	r.Phases[phaseCapacity].Sent = m.capacityDone
	r.Phases[phaseBaseline].Offered = r.Capacity / 2
	r.Phases[phaseOverload].Offered = m.oc.Factor * r.Capacity
	r.Phases[phaseRecovery].Offered = r.Capacity / 2
	for p := range phases {
		ps := &r.Phases[p]
		for _, l := range [][]time.Duration{ok[p], refused[p], queued[p]} {
			slices.Sort(l)
		}
		ps.P50, ps.P99 = percentile(ok[p], 0.5), percentile(ok[p], 0.99)
		ps.QueueP99 = percentile(queued[p], 0.99)
		if n := len(ok[p]); n > 0 {
			ps.Max, ps.QueueMax = ok[p][n-1], queued[p][n-1]
		}
		ps.RefusalP50, ps.RefusalP99 = percentile(refused[p], 0.5), percentile(refused[p], 0.99)
		ps.HeapPeak, ps.GoroutinesPeak, ps.BacklogPeak = m.peaks[p].heap, m.peaks[p].goroutines, m.peaks[p].backlog
		ps.HeapLive = m.live[p]
	}
	// Recovery: the p99 latency of the calls sent in each second after the
	// overload, until it stays under the limit.
	base := r.Phases[phaseBaseline].P99
	r.RecoveryLimit = max(2*base, base+50*time.Millisecond)
	windows := int(math.Ceil(m.oc.Recovery.Seconds()))
	lat := make([][]time.Duration, windows)
	for _, rec := range m.records {
		if rec.phase != phaseRecovery || rec.outcome != outcomeOK {
			continue
		}
		if w := int(rec.sent.Sub(end) / time.Second); w >= 0 && w < windows {
			lat[w] = append(lat[w], rec.took)
		}
	}
	r.Recovered = -1
	for w := windows - 1; w >= 0; w-- {
		slices.Sort(lat[w])
		if len(lat[w]) == 0 || percentile(lat[w], 0.99) > r.RecoveryLimit {
			break
		}
		r.Recovered = time.Duration(w) * time.Second
	}
}

// WriteOverload writes r as a markdown report.
func WriteOverload(w io.Writer, r OverloadResult) {
	oc := r.Config
	s2s := "none"
	if oc.ScheduleToStart > 0 {
		s2s = oc.ScheduleToStart.String()
	}
	bound := "default (10000)"
	switch {
	case oc.MaxBacklog < 0:
		bound = "none"
	case oc.MaxBacklog > 0:
		bound = fmt.Sprint(oc.MaxBacklog)
	}
	via := "in process"
	if oc.Path == PathHTTP {
		via = "over HTTP (" + oc.HTTP + ")"
	}
	fmt.Fprintf(w, "toolwire-bench -overload: %s, GOMAXPROCS=%d; pool of %d slots running a %s tool; %gx its capacity for %s; schedule-to-start %s; backlog bound %s; calls %s\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), oc.Concurrency, oc.Service, oc.Factor, oc.For, s2s, bound, via)
	fmt.Fprintf(w, "| phase | offered calls/s | sent | ok | refused | expired | other | ok latency p50 / p99 / max | queue wait p99 / max | refusal p50 / p99 | heap peak / live at end | goroutines peak | pool backlog peak |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for p := range phases {
		ps := r.Phases[p]
		other := ps.Sent - ps.Outcomes[outcomeOK] - ps.Outcomes[outcomeOverloaded] - ps.Outcomes[outcomeExpired]
		if p == phaseCapacity { // a closed loop: only its throughput counts
			fmt.Fprintf(w, "| %s | %.0f (measured) | %d | %d | | | | | | | %.0f / %.0f MiB | %d | %d |\n",
				phaseNames[p], ps.Offered, ps.Sent, ps.Sent, float64(ps.HeapPeak)/(1<<20), float64(ps.HeapLive)/(1<<20), ps.GoroutinesPeak, ps.BacklogPeak)
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | %d | %d | %d | %d | %d | %s / %s / %s | %s / %s | %s / %s | %.0f / %.0f MiB | %d | %d |\n",
			phaseNames[p], ps.Offered, ps.Sent, ps.Outcomes[outcomeOK], ps.Outcomes[outcomeOverloaded], ps.Outcomes[outcomeExpired], other,
			fmtDur(ps.P50), fmtDur(ps.P99), fmtDur(ps.Max), fmtDur(ps.QueueP99), fmtDur(ps.QueueMax), fmtDur(ps.RefusalP50), fmtDur(ps.RefusalP99),
			float64(ps.HeapPeak)/(1<<20), float64(ps.HeapLive)/(1<<20), ps.GoroutinesPeak, ps.BacklogPeak)
	}
	rec := "never, within the recovery phase"
	if r.Recovered >= 0 {
		rec = fmt.Sprintf("%s after the overload ended", r.Recovered)
	}
	fmt.Fprintf(w, "\nCapacity %.0f calls/s. Latency of accepted calls back under %s (p99 per second, by send time) %s. Calls stream at the end: %.1f MiB.\n",
		r.Capacity, fmtDur(r.RecoveryLimit), rec, float64(r.CallsStreamBytes)/(1<<20))
	for p := range phases {
		for o, n := range r.Phases[p].Outcomes {
			if o != outcomeOK && o != outcomeOverloaded && o != outcomeExpired {
				fmt.Fprintf(w, "%s: %d calls ended %s\n", phaseNames[p], n, o)
			}
		}
	}
}

// fmtDur renders d in milliseconds (seconds past 10s).
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
