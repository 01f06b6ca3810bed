package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// poolCheckMinAge is the youngest view of the pool consumers a miss lists
// again: calls for a tool no pool serves cost at most one listing per
// poolCheckMinAge between them.
const poolCheckMinAge = time.Second

// poolCheckWarnEvery spaces the warnings about a listing that failed.
const poolCheckWarnEvery = 10 * time.Second

// poolCheck is admission's check that some pool consumes a call's subject
// (Config.PoolCheck): a call nobody would ever deliver is refused
// NOT_FOUND instead of being queued for good. Admission stays cheap: it
// reads a cached view of the pool consumers' filters, which a goroutine
// lists again every Config.PoolCheck. A subject the view does not cover
// is looked up in a fresh listing before it is refused, when the view
// began before the tool's spec was seen (a worker creates its pool
// consumer before it publishes its specs, so a listing begun after the
// spec arrived shows the pool) or is older than poolCheckMinAge (a pool
// created again under an unchanged spec). Consumers that are not pools'
// (an audit's, a replay's) do not count. When the consumers cannot be
// listed (no stream leader), calls are admitted: the orphan sweeper
// (internal/maintenance) ends any that no pool consumes after all.
type poolCheck struct {
	b     *bus.Bus
	log   *slog.Logger
	every time.Duration
	view  atomic.Pointer[poolView]
	// sem lets one listing run at a time; callers wait for it within
	// their context, then use its view if it began late enough.
	sem chan struct{}
	// warned is when the last failed listing was logged (unix ns).
	warned atomic.Int64

	mu   sync.Mutex // guards stop and done
	stop context.CancelFunc
	done chan struct{}
}

// poolView is one listing of the pool consumers' filters.
type poolView struct {
	cov maintenance.Coverage
	at  time.Time // when the listing began
	// tools memoises whether a tool's calls are covered, so that a call of
	// a covered tool costs a map lookup and no allocation. Only used when
	// no filter names a tenant (!cov.PerTenant(): every filter is a
	// tool's or a type's), since then the answer holds for every tenant.
	mu    sync.RWMutex
	tools map[toolKey]bool
}

// toolKey names one tool's calls, any tenant.
type toolKey struct {
	t              toolwirev1.ExecutorType
	provider, tool string
}

// covers reports whether a pool consumer of v filters the calls of tool
// for tenant.
func (v *poolView) covers(subj bus.Subjects, k toolKey, tenant string) bool {
	if v.cov.PerTenant() {
		return v.cov.Covers(subj.Call(k.t, tenant, k.provider, k.tool))
	}
	v.mu.RLock()
	ok, known := v.tools[k]
	v.mu.RUnlock()
	if known {
		return ok
	}
	// No filter names a tenant: any tenant token answers for all.
	ok = v.cov.Covers(subj.Call(k.t, "_", k.provider, k.tool))
	v.mu.Lock()
	v.tools[k] = ok
	v.mu.Unlock()
	return ok
}

func newPoolCheck(b *bus.Bus, every time.Duration, log *slog.Logger) *poolCheck {
	return &poolCheck{b: b, log: log, every: every, sem: make(chan struct{}, 1)}
}

// served reports whether a pool consumer filters the calls of tool k for
// tenant, for a tool whose spec the registry store took in at seen.
func (p *poolCheck) served(ctx context.Context, k toolKey, tenant string, seen time.Time) bool {
	v := p.view.Load()
	if v != nil && v.covers(p.b.Subjects, k, tenant) {
		return true
	}
	fresh := time.Now().Add(-poolCheckMinAge)
	if seen.After(fresh) {
		fresh = seen
	}
	if v == nil || v.at.Before(fresh) {
		var err error
		if v, err = p.refresh(ctx, fresh); err != nil {
			p.warn(err)
			return true // admitted: the orphan sweeper is the backstop
		}
	}
	return v.covers(p.b.Subjects, k, tenant)
}

// refresh lists the pool consumers, unless a listing begun at fresh or
// later is there by the time it is this caller's turn: that one is
// returned.
func (p *poolCheck) refresh(ctx context.Context, fresh time.Time) (*poolView, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	if v := p.view.Load(); v != nil && !v.at.Before(fresh) {
		return v, nil
	}
	at := time.Now()
	cov, err := maintenance.ListCoverage(ctx, p.b)
	if err != nil {
		return nil, err
	}
	v := &poolView{cov: cov, at: at, tools: map[toolKey]bool{}}
	p.view.Store(v)
	return v, nil
}

func (p *poolCheck) warn(err error) {
	now := time.Now().UnixNano()
	last := p.warned.Load()
	if now-last < int64(poolCheckWarnEvery) || !p.warned.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("pool consumers not listed; admitting calls without checking that a pool serves them", "err", err)
}

// start lists the pool consumers now and every p.every until end. A nil
// poolCheck does nothing.
func (p *poolCheck) start(context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
	return nil
}

func (p *poolCheck) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, max(p.every, 10*time.Second))
		if _, err := p.refresh(lctx, time.Now()); err != nil && ctx.Err() == nil {
			p.warn(err)
		}
		cancel()
		t.Reset(p.every)
	}
}

// end tells the listing goroutine to stop and returns a channel closed
// once it has. Idempotent; a nil or never started poolCheck returns a
// closed channel.
func (p *poolCheck) end() <-chan struct{} {
	if p == nil {
		return startstop.Closed
	}
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.mu.Unlock()
	if stop == nil {
		return startstop.Closed
	}
	stop()
	return done
}
