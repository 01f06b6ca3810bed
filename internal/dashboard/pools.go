package dashboard

// Pools and workers: per pool its queue, calls in flight, throughput and
// error rate over the last hour (sparklines), the workers that serve it
// and their isolation gaps; and the use of the stores.
//
// Decisions where the issue was silent:
//   - History is per replica and starts empty when the dispatcher starts
//     (the page says since when): poolHistory samples every 30 s into a
//     ring of 120 points (one hour) per pool.
//   - Queued and in flight are the pool consumer's NumPending and
//     NumAckPending as the dispatcher's load view last read them
//     (dispatch.Dispatcher.Pools); the dashboard reads nothing of its own.
//   - Throughput and error rate count the calls that finished, from the
//     calls index's live updates, per pool: a call's pool is the one whose
//     consumer takes its subject (dispatch.Dispatcher.PoolOf, admission's
//     own routing, from the tool's current spec). Errors are the outcomes
//     error, dead_lettered and expired; a cancelled call is no error.
//     Updates the index drops for a slow reader are not counted.
//   - There is no worker registry: the workers are those that answered a
//     call in the last hour (the index's Worker), with when they last did;
//     seeded at start from the index's newest calls of the last hour. A
//     worker's isolation gaps are read from the response of its latest
//     call (meta.isolation_gaps), at most gapLookups a sample and again
//     every gapRefresh. Workers do not report a version, so none is shown.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/telemetry"
)

// Pool history bounds.
const (
	sampleEvery   = 30 * time.Second
	historyPoints = 120 // one hour of samples
	workerWindow  = time.Hour
	maxWorkers    = 1000
	gapLookups    = 10
	gapRefresh    = 10 * time.Minute
	gapTimeout    = 5 * time.Second
)

// poolHistory samples the pools and counts finished calls per pool; its
// goroutine (run) is owned by the Server.
type poolHistory struct {
	s     *Server
	every time.Duration // sampleEvery; a test sets less before Start

	mu      sync.Mutex
	since   time.Time // when sampling began; zero before run
	pools   map[string]*poolRing
	done    map[string]int // finished calls per pool since the last sample
	errs    map[string]int
	workers map[string]*workerSeen
}

// poolSample is one pool at one sample.
type poolSample struct {
	At               time.Time
	Queued, InFlight int64
	Done, Errors     int // finished in the interval that ends at At
}

// poolRing holds a pool's newest historyPoints samples.
type poolRing struct {
	samples []poolSample
	next    int // where the next sample goes once full
}

func (r *poolRing) add(s poolSample) {
	if len(r.samples) < historyPoints {
		r.samples = append(r.samples, s)
		return
	}
	r.samples[r.next] = s
	r.next = (r.next + 1) % historyPoints
}

// ordered returns the samples oldest first.
func (r *poolRing) ordered() []poolSample {
	return append(slices.Clone(r.samples[r.next:]), r.samples[:r.next]...)
}

// workerSeen is a worker as the finished calls show it.
type workerSeen struct {
	Name, Pool string
	LastSeen   time.Time
	Calls      int // since it was first seen, within the window
	Gaps       []string
	gapsAt     time.Time // when Gaps was read; zero = never
	// The latest call it answered, whose response says its gaps.
	tenant, callID, tool string
}

func newPoolHistory(s *Server) *poolHistory {
	return &poolHistory{s: s, every: sampleEvery, pools: map[string]*poolRing{}, done: map[string]int{}, errs: map[string]int{},
		workers: map[string]*workerSeen{}}
}

// run samples every p.every and counts the finished calls of the index's
// live updates, until ctx ends.
func (p *poolHistory) run(ctx context.Context) {
	p.mu.Lock()
	p.since = time.Now()
	p.mu.Unlock()
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	updates, unsubscribe := p.subscribe()
	defer func() { unsubscribe() }()
	ready := p.s.index.Ready()
	p.sample(ctx, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-ready:
			ready = nil
			p.seed(time.Now())
		case e, ok := <-updates:
			if !ok { // the index stopped; subscribe again at the next tick
				updates = nil
				continue
			}
			p.count(e)
		case now := <-tick.C:
			if updates == nil {
				updates, unsubscribe = p.subscribe()
			}
			p.sample(ctx, now)
		}
	}
}

// subscribe subscribes to the index's live updates; a nil channel when it
// cannot (tried again at the next sample).
func (p *poolHistory) subscribe() (<-chan callindex.Entry, func()) {
	ch, cancel, err := p.s.index.Subscribe()
	if err != nil {
		p.s.log.Warn("dashboard pool history: no live updates; throughput is not counted until there are", "err", err)
		return nil, func() {}
	}
	return ch, cancel
}

// poolOf is the pool that takes the calls of tool for tenant ("" none).
func (p *poolHistory) poolOf(tenant, tool string) string {
	ent, err := p.s.cfg.Registry.Get(tool)
	if err != nil {
		return ""
	}
	return p.s.cfg.Core.PoolOf(tenant, ent.Spec)
}

// isError says whether a finished call's outcome counts as an error.
func isError(outcome string) bool {
	return outcome == audit.OutcomeError || outcome == audit.OutcomeDeadLettered || outcome == audit.OutcomeExpired
}

// count takes a live update in: a finished call counts for its pool and
// its worker; a refused one never reached a pool.
func (p *poolHistory) count(e callindex.Entry) {
	if e.Outcome == audit.OutcomePending || e.Refused() {
		return
	}
	pool := p.poolOf(e.Tenant, e.Tool)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool != "" {
		p.done[pool]++
		if isError(e.Outcome) {
			p.errs[pool]++
		}
	}
	p.saw(e, pool, time.Now())
}

// saw notes the worker of a finished call, at (mu held).
func (p *poolHistory) saw(e callindex.Entry, pool string, at time.Time) {
	if e.Worker == "" {
		return
	}
	w := p.workers[e.Worker]
	if w == nil {
		if len(p.workers) >= maxWorkers {
			p.forgetOldestWorker()
		}
		w = &workerSeen{Name: e.Worker}
		p.workers[e.Worker] = w
	}
	w.Calls++
	if at.After(w.LastSeen) {
		w.LastSeen, w.tenant, w.callID, w.tool = at, e.Tenant, e.ID, e.Tool
		if pool != "" {
			w.Pool = pool
		}
	}
}

func (p *poolHistory) forgetOldestWorker() {
	var oldest *workerSeen
	for _, w := range p.workers {
		if oldest == nil || w.LastSeen.Before(oldest.LastSeen) {
			oldest = w
		}
	}
	if oldest != nil {
		delete(p.workers, oldest.Name)
	}
}

// seed notes the workers of the index's newest calls of the last hour:
// those that ran before this replica started.
func (p *poolHistory) seed(now time.Time) {
	page, _, _ := p.s.index.Query(callindex.Query{Since: now.Add(-workerWindow), Limit: callindex.MaxQueryLimit})
	pools := map[[2]string]string{}
	for _, e := range page {
		if e.Worker == "" {
			continue
		}
		k := [2]string{e.Tenant, e.Tool}
		pool, ok := pools[k]
		if !ok {
			pool = p.poolOf(e.Tenant, e.Tool)
			pools[k] = pool
		}
		p.mu.Lock()
		p.saw(e, pool, e.Time.Add(e.Duration))
		p.mu.Unlock()
	}
}

// sample records every pool's figures and the calls finished since the
// last sample, forgets workers silent for workerWindow, and reads the
// isolation gaps of a few workers.
func (p *poolHistory) sample(ctx context.Context, now time.Time) {
	pools := p.s.cfg.Core.Pools()
	p.mu.Lock()
	live := map[string]bool{}
	for _, ps := range pools {
		live[ps.Pool] = true
		r := p.pools[ps.Pool]
		if r == nil {
			r = &poolRing{}
			p.pools[ps.Pool] = r
		}
		r.add(poolSample{At: now, Queued: ps.Queued, InFlight: ps.InFlight, Done: p.done[ps.Pool], Errors: p.errs[ps.Pool]})
	}
	maps.DeleteFunc(p.pools, func(name string, _ *poolRing) bool { return !live[name] })
	clear(p.done)
	clear(p.errs)
	maps.DeleteFunc(p.workers, func(_ string, w *workerSeen) bool { return now.Sub(w.LastSeen) > workerWindow })
	type lookup struct{ worker, tenant, callID, tool string }
	var due []lookup
	for _, w := range p.workers {
		if len(due) < gapLookups && w.callID != "" && now.Sub(w.gapsAt) > gapRefresh {
			due = append(due, lookup{w.Name, w.tenant, w.callID, w.tool})
		}
	}
	p.mu.Unlock()
	for _, l := range due {
		gaps, err := p.gapsOf(ctx, l.tenant, l.callID, l.tool)
		if err != nil {
			if ctx.Err() == nil {
				p.s.log.Debug("dashboard pool history: isolation gaps not read", "worker", l.worker, "err", err)
			}
			continue
		}
		p.mu.Lock()
		if w := p.workers[l.worker]; w != nil {
			w.Gaps, w.gapsAt = gaps, now
		}
		p.mu.Unlock()
	}
}

// gapsOf reads the isolation gaps the response of call callID of tool
// reports, if it is believed (internal/believed).
func (p *poolHistory) gapsOf(ctx context.Context, tenant, callID, tool string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, gapTimeout)
	defer cancel()
	b := p.s.cfg.Streams
	m, err := bus.LastMsg(ctx, b.Results, b.Subjects.ResultAnyDispatcher(tenant, callID))
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w", callID, err)
	}
	resp, _, err := believed.Check(ctx, p.s.signers, believed.MsgOf(m), tool)
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w", callID, err)
	}
	return resp.GetMeta().GetIsolationGaps(), nil
}

// poolsView is what the page shows of the history.
type poolsView struct {
	since   time.Time
	pools   map[string][]poolSample
	workers []workerSeen
}

// view copies what the page needs.
func (p *poolHistory) view() poolsView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := poolsView{since: p.since, pools: map[string][]poolSample{}}
	for name, r := range p.pools {
		v.pools[name] = r.ordered()
	}
	for _, w := range p.workers {
		c := *w
		c.Gaps = slices.Clone(w.Gaps)
		v.workers = append(v.workers, c)
	}
	slices.SortFunc(v.workers, func(a, b workerSeen) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// spark is one sparkline: the points of an SVG polyline in a
// sparkWidth × sparkHeight box, the hour's newest sample at the right
// edge, and the figures it is labelled with.
type spark struct {
	Name      string // what it shows
	Points    string
	Last, Max string
}

const (
	sparkWidth  = historyPoints - 1
	sparkHeight = 40
)

// sparkOf draws values (oldest first, one per sample) of what name
// says; label formats a value.
func sparkOf(name string, values []float64, label func(float64) string) spark {
	if len(values) == 0 {
		return spark{Name: name}
	}
	hi := slices.Max(values)
	point := func(x int, v float64) string {
		y := float64(sparkHeight)
		if hi > 0 {
			y = sparkHeight - v/hi*(sparkHeight-2) - 1 // a pixel's margin top and bottom
		}
		return strconv.Itoa(x) + "," + strconv.FormatFloat(y, 'f', 1, 64)
	}
	points := make([]string, 0, len(values)+1)
	if len(values) == 1 { // a polyline needs two points: a dash
		points = append(points, point(sparkWidth-1, values[0]))
	}
	for i, v := range values {
		points = append(points, point(sparkWidth-(len(values)-1-i), v))
	}
	return spark{Name: name, Points: strings.Join(points, " "), Last: label(values[len(values)-1]), Max: label(hi)}
}

// poolCard is one pool on the page.
type poolCard struct {
	dispatch.PoolStatus
	Queued, InFlight, Throughput, ErrorRate spark
	Samples                                 int
	Workers                                 []workerSeen
	Gaps                                    []string
}

type storeRow struct {
	telemetry.StoreLoad
	Used, Limit string // formatted; Limit "" when unbounded
	Use         meter  // of MaxBytes
}

type poolsData struct {
	Done    string // the outcome of a pause or resume just made
	Since   time.Time
	Every   time.Duration
	Pools   []poolCard
	Orphans []workerSeen // workers of no pool the dispatcher lists
	Stores  []storeRow
}

// poolsPage shows the pools, their last hour, their workers, and the
// stores: the installation's, shared by every tenant, so only to a key
// with the installation scope (their figures count every tenant's calls).
func (s *Server) poolsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	if !v.Installation {
		s.refuse(w, r, v, http.StatusForbidden, `the pools and stores are the installation's, shared by every tenant: this page needs a key with the "installation" scope`)
		return
	}
	hist := s.pools.view()
	d := poolsData{Done: doneMessage(r), Since: hist.since, Every: s.pools.every}
	known := map[string]bool{}
	for _, ps := range s.cfg.Core.Pools() {
		known[ps.Pool] = true
		d.Pools = append(d.Pools, cardOf(ps, hist.pools[ps.Pool], hist.workers, s.pools.every))
	}
	for _, wk := range hist.workers {
		if !known[wk.Pool] {
			d.Orphans = append(d.Orphans, wk)
		}
	}
	for _, st := range s.cfg.Core.Stores() {
		row := storeRow{StoreLoad: st, Used: byteSize(st.Bytes)}
		if st.MaxBytes > 0 {
			row.Limit, row.Use = byteSize(st.MaxBytes), meterOf(st.Bytes, st.MaxBytes)
		}
		d.Stores = append(d.Stores, row)
	}
	s.render(w, r, http.StatusOK, "pools", v, "Pools and workers", "pools", d)
}

// byteSize is n bytes to three significant figures: 512 B, 2.87 KiB,
// 4.00 GiB.
func byteSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, 0
	for ; f >= 1024 && unit < 3; unit++ {
		f /= 1024
	}
	return strconv.FormatFloat(f, 'f', max(2-int(math.Log10(f)), 0), 64) + " " + [...]string{"KiB", "MiB", "GiB", "TiB"}[unit]
}

// cardOf builds one pool's card from its status now and its samples.
func cardOf(ps dispatch.PoolStatus, samples []poolSample, workers []workerSeen, every time.Duration) poolCard {
	c := poolCard{PoolStatus: ps, Samples: len(samples)}
	queued, inFlight, rate, errRate := make([]float64, len(samples)), make([]float64, len(samples)), make([]float64, len(samples)), make([]float64, len(samples))
	for i, sm := range samples {
		queued[i], inFlight[i] = float64(sm.Queued), float64(sm.InFlight)
		rate[i] = float64(sm.Done) / every.Minutes()
		if sm.Done > 0 {
			errRate[i] = float64(sm.Errors) / float64(sm.Done)
		}
	}
	count := func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }
	c.Queued, c.InFlight = sparkOf("queued", queued, count), sparkOf("in flight", inFlight, count)
	c.Throughput = sparkOf("finished", rate, func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "/min" })
	c.ErrorRate = sparkOf("error rate", errRate, func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" })
	gaps := map[string]bool{}
	for _, w := range workers {
		if w.Pool == ps.Pool {
			c.Workers = append(c.Workers, w)
			for _, g := range w.Gaps {
				gaps[g] = true
			}
		}
	}
	c.Gaps = slices.Sorted(maps.Keys(gaps))
	return c
}
