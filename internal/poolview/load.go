package poolview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/startstop"
)

// Admission never asks the server: it reads Load, a cached view that one
// goroutine refreshes every LoadConfig.Refresh (one consumer listing of
// the calls stream) and, every storeRefresh, the use of every store (one
// stream info each and the account's info). Between refreshes a pool's
// backlog is estimated (poolLoad.estimate), and a refusal the estimate
// alone cannot carry waits for a fresh read (Check); other replicas'
// admissions since the last read are what it cannot see. See doc.go,
// "Overload".

// storeRefresh is how often the stores' use is read: stores fill over
// minutes, pools over seconds.
const storeRefresh = 2 * time.Second

// minKickInterval is the shortest time between two reads asked for by
// admission (kick): at most 50 a second per replica.
const minKickInterval = 20 * time.Millisecond

// Defaults of LoadConfig.
const (
	DefaultRefresh        = 500 * time.Millisecond
	DefaultMaxBacklog     = 10000
	DefaultStoreHighWater = 0.9
	DefaultMaxQueueWait   = 2 * time.Second
)

// QueueWaitRounds is how many of its own calls' time a pool may queue
// by default: the default bound on queue wait is the larger of
// LoadConfig.MaxQueueWait and QueueWaitRounds times the pool's typical
// call time, so a pool of slow tools (30s calls) queues three rounds of
// its calls (90s) while a fast pool (20ms calls, up to 666ms) keeps
// MaxQueueWait. See doc.go, "Overload".
const QueueWaitRounds = 3

// LoadConfig configures a Load.
type LoadConfig struct {
	// Bus is where the pools and stores are read: its calls stream's pool
	// consumers, its stores' streams and the account. Required.
	Bus *bus.Bus
	// Refresh is how often the pool consumers' backlogs are read (one
	// consumer listing of the calls stream; the stores' use is read every
	// 2s, or every Refresh when longer). Default 500ms; at least 10ms.
	Refresh time.Duration
	// MaxBacklog bounds each pool's backlog: its calls queued and running,
	// the pool consumer's NumPending + NumAckPending as this replica sees
	// it (read every Refresh, plus what it admitted since). Default 10000;
	// -1 = no bound.
	MaxBacklog int
	// PoolMaxBacklog overrides MaxBacklog by pool name; -1 = no bound.
	PoolMaxBacklog map[string]int
	// MaxQueueWait bounds the expected wait of a call that has no
	// schedule-to-start of its own, with the pool's own service time: a
	// call its pool would start later than the larger of MaxQueueWait
	// and QueueWaitRounds times the pool's typical call time is refused
	// OVERLOADED, so that overload is refused fast with no configuration
	// (without it, only MaxBacklog refused: 10,000 calls, minutes of
	// queue) while a pool of slow tools still queues a few rounds of its
	// calls. A call's own schedule-to-start replaces it, longer or
	// shorter. Default 2s; negative = no bound (for the pools without
	// one of their own in PoolMaxQueueWait).
	MaxQueueWait time.Duration
	// PoolMaxQueueWait is a pool's own bound on queue wait, by pool name:
	// it replaces the default (MaxQueueWait, scaled with the pool's call
	// time) and does not scale. At least 100ms; negative = no bound.
	PoolMaxQueueWait map[string]time.Duration
	// StoreHighWater is the share of a store's byte limit past which
	// calls that would write it are refused, so that the calls already
	// admitted still have room to finish. Default 0.9; above 0, at most 1.
	StoreHighWater float64
	// Logger receives the warning when reading fails (once per streak).
	// Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with the zero fields set.
func (c LoadConfig) WithDefaults() LoadConfig {
	c.Refresh = cmp.Or(c.Refresh, DefaultRefresh)
	c.MaxBacklog = cmp.Or(c.MaxBacklog, DefaultMaxBacklog)
	c.StoreHighWater = cmp.Or(c.StoreHighWater, DefaultStoreHighWater)
	c.MaxQueueWait = cmp.Or(c.MaxQueueWait, DefaultMaxQueueWait)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate returns an error naming the first field that is wrong.
func (c LoadConfig) Validate() error {
	switch {
	case c.Bus == nil:
		return errors.New("poolview: LoadConfig.Bus is required")
	case c.Refresh < 10*time.Millisecond:
		return fmt.Errorf("poolview: LoadConfig.Refresh %s is below 10ms", c.Refresh)
	case c.MaxQueueWait > 0 && c.MaxQueueWait < 100*time.Millisecond:
		return fmt.Errorf("poolview: LoadConfig.MaxQueueWait %s is below 100ms (negative = no bound)", c.MaxQueueWait)
	case c.MaxBacklog == 0 || c.MaxBacklog < -1:
		return fmt.Errorf("poolview: LoadConfig.MaxBacklog %d must be positive or -1", c.MaxBacklog)
	case c.StoreHighWater <= 0 || c.StoreHighWater > 1:
		return fmt.Errorf("poolview: LoadConfig.StoreHighWater %g must be above 0 and at most 1", c.StoreHighWater)
	}
	for pool, n := range c.PoolMaxBacklog {
		if n == 0 || n < -1 {
			return fmt.Errorf("poolview: LoadConfig.PoolMaxBacklog[%s] %d must be positive or -1", pool, n)
		}
	}
	for pool, d := range c.PoolMaxQueueWait {
		if d >= 0 && d < 100*time.Millisecond {
			return fmt.Errorf("poolview: LoadConfig.PoolMaxQueueWait[%s] %s is below 100ms (negative = no bound)", pool, d)
		}
	}
	return nil
}

// queueWaitBound is pool's own bound on queue wait (PoolMaxQueueWait;
// -1 = none), or 0: the default, scaled with its call time.
func (c LoadConfig) queueWaitBound(pool string) time.Duration {
	if d, ok := c.PoolMaxQueueWait[pool]; ok {
		return max(d, -1)
	}
	return 0
}

// backlogBound is pool's backlog bound; -1 = none.
func (c LoadConfig) backlogBound(pool string) int64 {
	if n, ok := c.PoolMaxBacklog[pool]; ok {
		return int64(n)
	}
	return int64(c.MaxBacklog)
}

// Load is the cached view of what admission must not overrun: every pool
// consumer's backlog and drain rate, and every store's use. Admission
// reads it lock-free (Check); the refresh goroutine alone writes it. It
// is a startstop.Service: Start reads it once, so that the first calls
// are checked too, and starts the refresh; Stop ends it. Safe for
// concurrent use.
type Load struct {
	cfg  LoadConfig
	bus  *bus.Bus
	log  *slog.Logger
	life startstop.Funcs

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

// NewLoad returns a Load over cfg.Bus; nothing is read until Start.
func NewLoad(cfg LoadConfig) (*Load, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Load{cfg: cfg, bus: cfg.Bus, log: cfg.Logger, kick: make(chan struct{}, 1),
		pools: map[string]*poolLoad{}, filters: map[string][]string{}, streams: map[string]jetstream.Stream{},
		poolPrefix: strings.TrimSuffix(cfg.Bus.Config.PoolConsumer("x"), "x")}
	l.refreshed.Store(&refreshGen{done: make(chan struct{})})
	l.life.StartFunc, l.life.StopFunc = l.start, l.stopRefresh
	return l, nil
}

// Start reads the pools and stores once (within 2s; a failed read is
// logged and admission admits until a read succeeds), then refreshes them
// every Refresh until Stop.
func (l *Load) Start(ctx context.Context) error { return l.life.Start(ctx) }

// Stop ends the refresh and waits for it, or for ctx.
func (l *Load) Stop(ctx context.Context) error { return l.life.Stop(ctx) }

// start reads the view once, so that the first calls are checked too, and
// starts the refresh goroutine; stopRefresh ends it.
func (l *Load) start(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	l.refresh(rctx, time.Now())
	cancel()
	ctx, l.stop = context.WithCancel(context.Background())
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
	return nil
}

// stopRefresh tells the refresh goroutine to stop and returns a channel
// closed once it has.
func (l *Load) stopRefresh() <-chan struct{} {
	if l.stop == nil {
		return startstop.Closed
	}
	l.stop()
	return l.done
}

func (l *Load) run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Refresh)
	defer t.Stop()
	last := time.Now()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		case <-l.kick:
			if early := minKickInterval - time.Since(last); early > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(early):
				}
			}
			now = time.Now()
		}
		rctx, cancel := context.WithTimeout(ctx, max(l.cfg.Refresh, 2*time.Second))
		l.refresh(rctx, now)
		cancel()
		last = time.Now()
	}
}

// refresh reads the pool consumers (and, when due, the stores) and
// publishes a new snapshot. A failed read keeps the previous figures, and
// the estimates go on from them.
func (l *Load) refresh(ctx context.Context, now time.Time) {
	err := l.readPools(ctx)
	if now.Sub(l.storesAt) >= storeRefresh {
		if serr := l.readStores(ctx); serr == nil {
			l.storesAt = now
		} else {
			err = errors.Join(err, serr)
		}
	}
	switch {
	case err != nil && !l.failing && ctx.Err() == nil:
		l.log.Warn("reading pool backlogs and store use failed; admission uses the last figures", "err", err)
		l.failing = true
	case err == nil && l.failing:
		l.log.Info("reading pool backlogs and store use works again")
		l.failing = false
	}
	l.publish()
	close(l.refreshed.Swap(&refreshGen{at: time.Now(), done: make(chan struct{})}).done)
}
