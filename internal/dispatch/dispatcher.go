package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/lazy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
)

// ErrStopped is returned by calls made after Stop.
var ErrStopped = errors.New("dispatch: dispatcher stopped")

// Dispatcher admits calls, publishes them and routes their results to
// waiting callers. It is the core behind every API server.
type Dispatcher struct {
	bus  *bus.Bus
	reg  *registry.Store
	cfg  Config
	log  *slog.Logger
	subj bus.Subjects

	mu      sync.Mutex
	waiters map[string]*waiter
	waiting int
	reaper  jetstream.ConsumeContext
	mover   jetstream.ConsumeContext
	retries *nats.Subscription // dead-letter retries operators request (dlqretry.go)
	stopped bool

	// results consumes the stored results routed to this replica
	// (results.go); resultsCons is its consumer, deleted at Stop.
	results     jetstream.ConsumeContext
	resultsCons jetstream.Consumer
	// status reports the connection's reconnects to the goroutine that
	// then looks up the results of waiting callers (results.go);
	// stopRechecks ends it, and rechecksDone is closed when it has.
	status       chan nats.Status
	stopRechecks context.CancelFunc
	rechecksDone chan struct{}

	// sweepStop ends the orphan sweeper (orphans.go); sweepDone is closed
	// when it has ended. Nil when it does not run.
	sweepStop context.CancelFunc
	sweepDone chan struct{}
	// pools is admission's view of the pool consumers (poolcheck.go); nil
	// when Config.PoolCheck is negative.
	pools *poolCheck

	callsStream string   // cached: the name is computed from the prefix
	expectCalls []string // the Nats-Expected-Stream header value; never modified
	lazyRecords *lazy.Queue
	applier     *intents.Applier

	tracer  trace.Tracer // nil = tracing off
	metrics *telemetry.DispatcherMetrics

	caps callerCaps // per-caller Watches and waiting requests
	load *loadView  // pool backlogs and store use, for admission (load.go)
	// lookResult is loadResult; a test replaces it to pin an interleaving
	// the server's asynchronous store makes rare.
	lookResult func(ctx context.Context, subject string) (*toolwirev1.ToolResponse, error)
}

// New returns a Dispatcher over b and the registry store reg (which the
// caller starts and stops).
func New(b *bus.Bus, reg *registry.Store, cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics := cfg.Metrics
	if metrics == nil {
		var err error
		if metrics, err = telemetry.NewDispatcherMetrics(nil); err != nil {
			return nil, fmt.Errorf("dispatch: metrics: %w", err)
		}
	}
	d := &Dispatcher{bus: b, reg: reg, cfg: cfg, subj: b.Subjects, callsStream: b.Config.CallsStream(), expectCalls: []string{b.Config.CallsStream()},
		lazyRecords: lazy.NewQueue(cfg.AcceptedRecordDelay), applier: intents.NewApplier(b.Sessions, intents.ApplierConfig{}),
		log:     telemetry.WithTraceIDs(cfg.Logger).With("component", "dispatcher", "dispatcher", cfg.Name),
		waiters: map[string]*waiter{}, tracer: telemetry.Tracer(cfg.TracerProvider), metrics: metrics}
	d.lookResult = d.loadResult
	if cfg.PoolCheck > 0 {
		d.pools = newPoolCheck(b, cfg.PoolCheck, d.log)
	}
	d.load = newLoadView(d)
	metrics.ObserveLoad(d.load.metrics)
	metrics.ObserveWaiting(func() float64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		return float64(d.waiting)
	})
	return d, nil
}

// Name is the replica's routing name.
func (d *Dispatcher) Name() string { return d.cfg.Name }

// Start consumes this replica's stored results and starts the reaper, the
// retry mover, the orphan sweeper and the listing of the pool consumers
// that admission checks calls against (poolcheck.go).
// (Pool consumers are created by workers before they register their tools,
// and admission refuses a call no pool consumer filters, so no call is
// admitted before a consumer for it exists.)
func (d *Dispatcher) Start(ctx context.Context) error {
	recheck := make(chan struct{}, 1) // the results consumer failed
	cons, results, err := d.followResults(ctx, recheck)
	if err != nil {
		return err
	}
	stopResults := func() {
		results.Stop()
		d.deleteResultsConsumer(cons)
	}
	reaper, err := d.startReaper(ctx)
	if err != nil {
		stopResults()
		return err
	}
	mover, err := d.startMover(ctx)
	if err != nil {
		reaper.Stop()
		stopResults()
		return err
	}
	retries, err := d.serveDLQRetries(ctx)
	if err != nil {
		mover.Stop()
		reaper.Stop()
		stopResults()
		return err
	}
	d.lazyRecords.Start()
	d.load.start(ctx)
	d.mu.Lock()
	d.results, d.resultsCons, d.reaper, d.mover, d.retries = results, cons, reaper, mover, retries
	d.status = d.bus.NC.StatusChanged(nats.CONNECTED)
	var rctx context.Context
	rctx, d.stopRechecks = context.WithCancel(context.WithoutCancel(ctx))
	d.rechecksDone = make(chan struct{})
	go d.recheckOnFailures(rctx, d.status, recheck, d.rechecksDone)
	d.startSweeper()
	d.pools.start()
	d.mu.Unlock()
	return flush(ctx, d.bus.NC)
}

// Stop stops accepting calls and releases every waiting caller: each gets
// ErrStopped and can fetch the result later by call id from any replica.
func (d *Dispatcher) Stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	if d.status != nil {
		d.bus.NC.RemoveStatusListener(d.status)
		d.stopRechecks()
	}
	if d.retries != nil {
		_ = d.retries.Unsubscribe()
	}
	if d.reaper != nil {
		d.reaper.Stop()
	}
	if d.mover != nil {
		d.mover.Stop()
		d.lazyRecords.Stop()
	}
	for id, w := range d.waiters {
		close(w.ch)
		delete(d.waiters, id)
	}
	results, cons, rechecksDone := d.results, d.resultsCons, d.rechecksDone
	d.mu.Unlock()
	// Outside the lock too: each may be in a server read for seconds, and a
	// metrics scrape or a waiter's cancel takes the lock (review finding).
	d.stopSweeper()
	d.pools.end()
	d.load.stopRefresh()
	// Outside the lock: a recheck of waiters takes it, and stopping the
	// results consumer waits for an attempt to make it again (during an
	// outage, up to about 20s).
	if rechecksDone != nil {
		<-rechecksDone
	}
	if results != nil {
		results.Stop()
		d.deleteResultsConsumer(cons)
	}
}

// flush makes sure the server has processed our subscriptions.
func flush(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return nc.FlushWithContext(ctx)
}

// Config returns the dispatcher's configuration, defaults filled in.
func (d *Dispatcher) Config() Config { return d.cfg }
