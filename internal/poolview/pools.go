package poolview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// DefaultEvery is PoolsConfig.Every's default.
const DefaultEvery = 10 * time.Second

// PoolsConfig configures a Pools.
type PoolsConfig struct {
	// Bus is where the pool consumers are listed (its calls stream).
	// Required.
	Bus *bus.Bus
	// Every is how often the pool consumers are listed again. Default
	// 10s; must be positive (a dispatcher without the check makes no
	// Pools).
	Every time.Duration
	// Logger receives the warning when the consumers cannot be listed (at
	// most every 10s). Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with the zero fields set.
func (c PoolsConfig) WithDefaults() PoolsConfig {
	c.Every = cmp.Or(c.Every, DefaultEvery)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate returns an error naming the first field that is wrong.
func (c PoolsConfig) Validate() error {
	switch {
	case c.Bus == nil:
		return errors.New("poolview: PoolsConfig.Bus is required")
	case c.Every <= 0:
		return fmt.Errorf("poolview: PoolsConfig.Every %s must be positive", c.Every)
	}
	return nil
}

// Pools is admission's check that some pool consumes a call's subject: a
// call nobody would ever deliver is refused NOT_FOUND instead of being
// queued for good. Admission stays cheap: it reads a cached view of the
// pool consumers' filters, which a goroutine lists again every
// PoolsConfig.Every. A subject the view does not cover is looked up in a
// fresh listing before it is refused, when the view began before the
// tool's spec was seen (a worker creates its pool consumer before it
// publishes its specs, so a listing begun after the spec arrived shows
// the pool) or is older than poolCheckMinAge (a pool created again under
// an unchanged spec). Consumers that are not pools' (an audit's, a
// replay's) do not count. When the consumers cannot be listed (no stream
// leader), calls are admitted: the orphan sweeper (internal/maintenance)
// ends any that no pool consumes after all. It is a startstop.Service;
// a nil *Pools serves every call and starts nothing. Safe for concurrent
// use.
type Pools struct {
	b     *bus.Bus
	log   *slog.Logger
	every time.Duration
	view  atomic.Pointer[poolView]
	// sem lets one listing run at a time; callers wait for it within
	// their context, then use its view if it began late enough.
	sem chan struct{}
	// warned is when the last failed listing was logged (unix ns).
	warned atomic.Int64

	life startstop.Funcs
	// stop and done are the listing goroutine's, set by start.
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
	tools map[ToolKey]bool
}

// ToolKey names one tool's calls, any tenant.
type ToolKey struct {
	Executor       toolwirev1.ExecutorType
	Provider, Name string
}

// covers reports whether a pool consumer of v filters the calls of tool
// for tenant.
func (v *poolView) covers(subj bus.Subjects, k ToolKey, tenant string) bool {
	if v.cov.PerTenant() {
		return v.cov.Covers(subj.Call(k.Executor, tenant, k.Provider, k.Name))
	}
	v.mu.RLock()
	ok, known := v.tools[k]
	v.mu.RUnlock()
	if known {
		return ok
	}
	// No filter names a tenant: any tenant token answers for all.
	ok = v.cov.Covers(subj.Call(k.Executor, "_", k.Provider, k.Name))
	v.mu.Lock()
	v.tools[k] = ok
	v.mu.Unlock()
	return ok
}

// NewPools returns a Pools over cfg.Bus; nothing is listed until Start
// or the first Served.
func NewPools(cfg PoolsConfig) (*Pools, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pools{b: cfg.Bus, log: cfg.Logger, every: cfg.Every, sem: make(chan struct{}, 1)}
	p.life.StartFunc, p.life.StopFunc = p.start, p.end
	return p, nil
}

// Served reports whether a pool consumer filters the calls of tool k for
// tenant, for a tool whose spec the registry store took in at seen. It
// lists the consumers again first when the view may not show the tool's
// pool yet (waiting within ctx for a listing under way), and answers true
// when they cannot be listed. A nil *Pools answers true.
func (p *Pools) Served(ctx context.Context, k ToolKey, tenant string, seen time.Time) bool {
	if p == nil {
		return true
	}
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
func (p *Pools) refresh(ctx context.Context, fresh time.Time) (*poolView, error) {
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
	v := &poolView{cov: cov, at: at, tools: map[ToolKey]bool{}}
	p.view.Store(v)
	return v, nil
}

func (p *Pools) warn(err error) {
	now := time.Now().UnixNano()
	last := p.warned.Load()
	if now-last < int64(poolCheckWarnEvery) || !p.warned.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("pool consumers not listed; admitting calls without checking that a pool serves them", "err", err)
}

// Start lists the pool consumers now, in the background, and again every
// PoolsConfig.Every until Stop. A nil *Pools does nothing.
func (p *Pools) Start(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.life.Start(ctx)
}

// Stop ends the listing and waits for it, or for ctx. A nil *Pools does
// nothing.
func (p *Pools) Stop(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.life.Stop(ctx)
}

func (p *Pools) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
	return nil
}

func (p *Pools) run(ctx context.Context) {
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
// once it has (startstop.Funcs calls it once, after a successful start).
func (p *Pools) end() <-chan struct{} {
	p.stop()
	return p.done
}
