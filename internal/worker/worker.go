package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/observed"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
)

// ErrShutdown is the cause a running call's context is cancelled with when
// the worker's grace period ends. Such a call is handed back (Nak without
// delay), not failed.
var ErrShutdown = errors.New("worker shutting down")

// Worker consumes calls of its pools and executes them. Start and Stop
// are idempotent; Stop blocks until every goroutine the worker owns has
// ended, or, when only executions the watchdog abandoned still run (their
// tools ignore their context), until its context ends, and then says so.
type Worker struct {
	bus *bus.Bus
	cfg Config
	log *slog.Logger
	// specs by name, each with its input schema compiled once per version:
	// replaced whole (never mutated) when a SpecSource changes, read
	// without a lock by handlers.
	specs atomic.Pointer[map[string]*registry.Entry]
	// serving are the pools whose fetch loops run (under mu).
	serving map[string]bool
	// declared are the pool consumers as the worker made them, by pool
	// (under mu); the guard (guard.go) puts back what differs from them.
	declared map[string]declaredPool
	// foreign is, by pool, the stamp of another worker's declaration the
	// guard last reported (guard goroutine only).
	foreign map[string]string
	// checkNow asks the guard for a check at once; guardLoop runs it.
	checkNow  chan struct{}
	guardLoop *startstop.Loop
	// gaps are the isolation mechanisms each executor type lacks here.
	gaps map[toolwirev1.ExecutorType][]string
	// specGaps add the gaps of one tool (a sandbox tool with network).
	specGaps map[toolwirev1.ExecutorType]executors.SpecIsolated

	mu      sync.Mutex
	started bool
	stopped bool
	// stopFetch ends fetching and any spec refresh; Stop calls it before
	// taking mu, which a refresh holds across its server round trips.
	stopFetch    atomic.Pointer[context.CancelFunc]
	fetchers     sync.WaitGroup
	handlers     sync.WaitGroup
	runners      *runners                     // handlers run on these
	settleShared atomic.Pointer[sharedSettle] // see settleContext
	// stopWatchdog ends the watchdog goroutine (watchdog.go); watching
	// waits for it.
	stopWatchdog chan struct{}
	watching     sync.WaitGroup
	inflight     atomic.Int64
	executed     atomic.Int64
	// shutDown is closed once Stop's sequence is done (shutdown).
	shutDown   chan struct{}
	cancels    cancels
	cancelSub  *nats.Subscription
	heartbeats map[string]*heartbeater
	// claimed maps each tool this worker's pools hold in the registry to
	// the subject it was claimed on (claims.go; under mu).
	claimed       map[string]string
	delayedEvents *delayed.Queue
	stats         stats
	// policies reads the policy in force for the pre-run policy check
	// (policycheck.go).
	policies *policystore.Reader

	// tracer is nil when tracing is off; metrics always exist.
	tracer  trace.Tracer
	metrics *telemetry.WorkerMetrics
	// executors are cfg.Executors decorated with observed.Executor and,
	// inside it, redactingExecutor (redact.go).
	executors map[toolwirev1.ExecutorType]executors.Executor
	// publishResult publishes a call's terminal response: the plain
	// publish decorated with the result metrics (observe.go).
	publishResult func(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error
}

// stats are counters of notable outcomes, read by Stats.
type stats struct {
	retries   atomic.Int64
	abandoned atomic.Int64
	// abandonedRunning counts abandoned executions that have not
	// returned yet.
	abandonedRunning atomic.Int64
	unknownOutcomes  atomic.Int64
	notStarted       atomic.Int64
	held             atomic.Int64
	awaited          atomic.Int64
	claimsLost       atomic.Int64
	badIntents       atomic.Int64
	approvalRefusals atomic.Int64
	policyRefusals   atomic.Int64
}

// Stats is a snapshot of a worker's counters.
type Stats struct {
	// Executed counts attempts run (each in-process retry is one).
	Executed int64
	// Retries counts attempts scheduled again after a retryable error.
	Retries int64
	// Abandoned counts executions that ignored their context past the
	// watchdog.
	Abandoned int64
	// UnknownOutcomes counts calls answered UNKNOWN_OUTCOME.
	UnknownOutcomes int64
	// NotStarted counts deliveries that ended without running their
	// attempt because its durable STARTED event could not be stored or
	// confirmed before the worker's grace period or the call's deadline
	// ended, or because a shutdown reached the attempt after its STARTED
	// was stored.
	NotStarted int64
	// Held counts server steps of a delivery (lookups, the STARTED event
	// and its read-back, the result) that failed and were tried again
	// while the delivery kept its call (hold.go) instead of handing it
	// back.
	Held int64
	// Awaited counts redeliveries that waited for the result of an
	// attempt another worker had started (awaitEarlierResult).
	Awaited int64
	// ClaimsLost counts deliveries left unsettled, without running,
	// because another delivery of the call had started the same attempt
	// first (a delivery that went stale past AckWait).
	ClaimsLost int64
	// IntentViolations counts results refused because the tool returned
	// undeclared or malformed intents.
	IntentViolations int64
	// ApprovalRefusals counts calls the approval re-check refused (no
	// approval or grant covers them: CONFIRMATION_REQUIRED, dead letter).
	ApprovalRefusals int64
	// PolicyRefusals counts calls carrying an approval or a grant that
	// the policy in force denied before they ran (PERMISSION_DENIED, dead
	// letter; policycheck.go).
	PolicyRefusals int64
	// InFlight is the number of calls being handled now.
	InFlight int64
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{Executed: w.executed.Load(), Retries: w.stats.retries.Load(), Abandoned: w.stats.abandoned.Load(),
		UnknownOutcomes: w.stats.unknownOutcomes.Load(), NotStarted: w.stats.notStarted.Load(), Held: w.stats.held.Load(), Awaited: w.stats.awaited.Load(),
		ClaimsLost: w.stats.claimsLost.Load(), IntentViolations: w.stats.badIntents.Load(),
		ApprovalRefusals: w.stats.approvalRefusals.Load(), PolicyRefusals: w.stats.policyRefusals.Load(), InFlight: w.inflight.Load()}
}

// New returns a Worker; it does nothing until Start.
func New(b *bus.Bus, cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics := cfg.Metrics
	if metrics == nil {
		var err error
		if metrics, err = telemetry.NewWorkerMetrics(nil); err != nil {
			return nil, fmt.Errorf("worker: metrics: %w", err)
		}
	}
	w := &Worker{bus: b, cfg: cfg, log: telemetry.WithTraceIDs(cfg.Logger).With("component", "worker", "worker", cfg.Name),
		gaps: map[toolwirev1.ExecutorType][]string{}, declared: map[string]declaredPool{}, foreign: map[string]string{}, checkNow: make(chan struct{}, 1), tracer: telemetry.Tracer(cfg.TracerProvider), metrics: metrics,
		executors: make(map[toolwirev1.ExecutorType]executors.Executor, len(cfg.Executors))}
	w.publishResult = w.observeResults(w.publishResultNow)
	w.policies = policystore.NewReader(b)
	if w.cfg.Registry == nil {
		w.cfg.Registry = registry.NewRemote(b.NC, b.Config, w.log).SignWith(b.Signer)
	}
	for t, e := range cfg.Executors {
		w.executors[t] = observed.Executor(redactingExecutor{e}, w.tracer, metrics)
		if si, ok := e.(executors.SpecIsolated); ok {
			if w.specGaps == nil {
				w.specGaps = map[toolwirev1.ExecutorType]executors.SpecIsolated{}
			}
			w.specGaps[t] = si
		}
		if iso, ok := e.(executors.Isolated); ok {
			if g := iso.IsolationGaps(); len(g) > 0 {
				w.gaps[t] = g
				w.log.Warn("executor isolation is weaker on this host", "executor", bus.TypeToken(t), "missing", g)
			}
		}
	}
	return w, nil
}

// Name is the worker's instance name.
func (w *Worker) Name() string { return w.cfg.Name }

// InFlight is the number of calls being handled now.
func (w *Worker) InFlight() int { return int(w.inflight.Load()) }

// Start publishes the worker's specs, ensures its pool consumers and starts
// fetching. It returns once fetching has begun. A claim refused because
// the tool's holder is not serving it but not yet for the grace period
// is made once more when that period ends (claimAgain); not ready
// meanwhile.
func (w *Worker) Start(ctx context.Context) error {
	return w.claimAgain(ctx, w.start)
}

func (w *Worker) start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if w.stopped {
		return errors.New("worker: Start after Stop")
	}
	sub, err := w.watchCancels()
	if err != nil {
		return err
	}
	w.cancelSub = sub
	w.cancels.live(time.Now(), w.bus.NC.Stats().Reconnects)
	w.delayedEvents = delayed.NewQueue(startedEventDelay)
	_ = w.delayedEvents.Start(ctx) // never fails
	slots := 0
	for _, p := range w.cfg.Pools {
		slots += p.Concurrency
	}
	w.runners = newRunners(slots)
	w.stopWatchdog = make(chan struct{})
	w.watching.Go(func() { w.watchdog(w.stopWatchdog) })

	w.heartbeats = map[string]*heartbeater{}
	w.serving = map[string]bool{}
	fetchCtx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	w.stopFetch.Store(&stopFetch)
	w.shutDown = make(chan struct{})
	if err := w.serveSpecs(ctx, fetchCtx); err != nil {
		stopFetch()
		w.fetchers.Wait()
		_ = w.delayedEvents.Stop(context.Background()) // waits for its goroutine
		w.runners.Stop()
		close(w.stopWatchdog)
		w.watching.Wait()
		_ = w.cancelSub.Unsubscribe()
		return err
	}
	if len(w.cfg.SpecSources) > 0 {
		w.fetchers.Add(1)
		go w.followSources(fetchCtx)
	}
	w.guardLoop = startstop.NewLoop(func(ctx context.Context) { w.guard(ctx, fetchCtx) })
	_ = w.guardLoop.Start(ctx) // never fails
	w.started = true
	w.log.Info("worker started", "pools", len(w.serving), "tools", len(*w.specs.Load()))
	return nil
}

// allSpecs is the static specs plus those of every SpecSource now.
func (w *Worker) allSpecs() []*toolwirev1.ToolSpec {
	specs := slices.Clone(w.cfg.Specs)
	for _, src := range w.cfg.SpecSources {
		specs = append(specs, src.Specs()...)
	}
	return specs
}

// serveSpecs makes the worker serve the current specs (under w.mu):
// consumers first, then the specs: a call can only be admitted once its
// tool is registered, so every admitted call has a consumer waiting. A
// pool's consumer only ever gains subjects (EnsurePool takes the union), so
// calls queued for a tool that disappears are still answered.
func (w *Worker) serveSpecs(ctx, fetchCtx context.Context) error {
	stamped, pools, consumers, err := w.ensureSpecs(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]*registry.Entry, len(stamped))
	for _, s := range stamped {
		// Compiled (and checked) by registry.Check in ensureSpecs: this
		// is the cached schema.
		input, err := registry.DefaultSchemas.Compile(s.InputSchemaJson)
		if err != nil {
			return fmt.Errorf("worker: tool %q: input schema: %w", s.Name, err)
		}
		m[s.Name] = &registry.Entry{Spec: s, Input: input}
	}
	w.specs.Store(&m)
	for i, p := range pools {
		hb := newHeartbeater(p.AckWait/3, w.log.With("pool", p.Name))
		w.heartbeats[p.Name] = hb
		p.hb = hb
		w.serving[p.Name] = true
		w.fetchers.Add(1)
		go w.fetchLoop(fetchCtx, p, consumers[i])
	}
	return nil
}

// Ensure creates or updates the pool consumers and publishes the specs, as
// Start does, but fetches nothing: a deployment step makes a pool's tools
// callable before any replica runs (a pool scaled to zero wakes up on its
// consumer's lag, and calls are admitted only for registered tools). Call
// it on a worker that is not started; Stop is then a no-op.
func (w *Worker) Ensure(ctx context.Context) error {
	return w.claimAgain(ctx, func(ctx context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.started || w.stopped {
			return errors.New("worker: Ensure on a started or stopped worker")
		}
		_, _, _, err := w.ensureSpecs(ctx)
		return err
	})
}

// ensureSpecs checks and stamps the current specs, claims their names
// (claims.go), ensures the consumer of every pool that has tools, then
// publishes the specs (under w.mu). It
// returns the stamped specs and the pools not yet served, with their
// consumers.
func (w *Worker) ensureSpecs(ctx context.Context) ([]*toolwirev1.ToolSpec, []Pool, []jetstream.Consumer, error) {
	specs := w.allSpecs()
	stamped := make([]*toolwirev1.ToolSpec, 0, len(specs))
	for _, spec := range specs {
		if err := registry.Check(spec); err != nil {
			return nil, nil, nil, fmt.Errorf("worker: %w", err)
		}
		if err := intents.CheckSpec(spec); err != nil {
			return nil, nil, nil, fmt.Errorf("worker: tool %q: %w", spec.GetName(), err)
		}
		stamped = append(stamped, registry.Stamp(spec))
	}
	if err := w.checkSpecs(stamped); err != nil {
		return nil, nil, nil, err
	}
	if err := w.claimSpecs(ctx, stamped); err != nil {
		return nil, nil, nil, err
	}
	var pools []Pool
	var consumers []jetstream.Consumer
	for _, p := range w.cfg.Pools {
		p.Subjects = nil
		for _, s := range stamped {
			if s.Executor == p.Type {
				if w.cfg.Shadow {
					p.Subjects = append(p.Subjects, w.bus.Subjects.ShadowToolSubject(s.Executor, s.Provider, s.Name))
				} else {
					p.Subjects = append(p.Subjects, w.bus.Subjects.ToolSubject(s.Executor, s.Provider, s.Name))
				}
			}
		}
		if len(p.Subjects) == 0 {
			if !w.started {
				w.log.Info("pool has no tools yet; not consuming", "pool", p.Name)
			}
			continue
		}
		cons, err := w.ensurePool(ctx, p)
		if err != nil {
			return nil, nil, nil, err
		}
		w.declared[p.Name] = declaredPool{pool: p.PoolConfig, consumer: cons.CachedInfo().Config}
		if w.serving[p.Name] {
			continue // its fetch loop runs; the consumer now filters the new subjects too
		}
		// The consumer's MaxDeliver is the one that counts: another replica
		// may have set it.
		p.MaxDeliver = cons.CachedInfo().Config.MaxDeliver
		pools = append(pools, p)
		consumers = append(consumers, cons)
	}
	if err := w.publishSpecs(ctx, stamped); err != nil {
		return nil, nil, nil, err
	}
	return stamped, pools, consumers, nil
}

// followSources serves the specs again whenever a SpecSource changes,
// until ctx ends. A failed update is logged and tried again at the next
// change or after a minute.
func (w *Worker) followSources(ctx context.Context) {
	defer w.fetchers.Done()
	changed := make(chan struct{}, 1)
	var relays sync.WaitGroup
	for _, src := range w.cfg.SpecSources {
		relays.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-src.Changed():
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	defer relays.Wait()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry.C:
		}
		w.mu.Lock()
		var err error
		if !w.stopped {
			uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = w.serveSpecs(uctx, ctx)
			cancel()
		}
		w.mu.Unlock()
		if err != nil {
			w.log.Error("serving changed specs failed; trying again", "err", err)
			retry.Reset(time.Minute)
		}
	}
}

// Stop shuts the worker down in this order: stop fetching; let in-flight
// calls finish (heartbeats continue) until ctx is done — the grace period;
// then cancel the rest with ErrShutdown, which hands them back to the
// stream at once, and wait for their handlers (the watchdog abandons an
// execution that ignores its context meanwhile); stop the heartbeats, the
// STARTED queue, the handler goroutines (runners), the watchdog and the
// cancel subscription; wait for the worker's goroutines to end. The
// caller drains the connection afterwards.
//
// Stop returns nil once every goroutine the worker owns has ended, and
// ctx's error if ctx ended while some still ran: the only ones it cannot
// end are executions the watchdog abandoned, which end when their tool
// returns. A call handed back at the end of the grace period is no error:
// its handler has ended. Stop is idempotent, and safe to call
// concurrently: a later call waits, with its own ctx, for what still runs.
func (w *Worker) Stop(ctx context.Context) error {
	if stop := w.stopFetch.Load(); stop != nil {
		(*stop)() // first: a spec refresh in progress gives up mu at once
	}
	w.mu.Lock()
	started, first := w.started, !w.stopped
	w.stopped = true
	w.mu.Unlock()
	if !started {
		return nil
	}
	if first {
		w.shutdown(ctx)
	}
	if err := waitFor(ctx, w.shutDown); err != nil {
		return err
	}
	err := w.runners.Wait(ctx)
	if err == nil || w.stats.abandonedRunning.Load() > 0 {
		return err
	}
	// Every handler has returned: the runners left end at once.
	return w.runners.Wait(context.WithoutCancel(ctx))
}

// shutdown is Stop's sequence, run once; it closes w.shutDown when done.
func (w *Worker) shutdown(ctx context.Context) {
	defer close(w.shutDown)
	if stop := w.stopFetch.Load(); stop != nil {
		(*stop)()
	}
	w.fetchers.Wait()
	_ = w.guardLoop.Stop(context.WithoutCancel(ctx)) // ends with fetchCtx: at most one server round trip
	done := make(chan struct{})
	go func() { w.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.log.Warn("grace period over: handing back running calls", "inflight", w.inflight.Load())
		w.cancels.cancelAll(ErrShutdown)
		<-done
	}
	w.cancels.cancelAll(ErrShutdown)
	for _, h := range w.heartbeats {
		h.stop()
	}
	_ = w.delayedEvents.Stop(context.Background()) // waits for its goroutine
	w.runners.Stop()
	close(w.stopWatchdog) // after the handlers: a stuck one ends through it
	w.watching.Wait()
	if sh := w.settleShared.Load(); sh != nil {
		sh.cancel()
	}
	_ = w.cancelSub.Unsubscribe()
	w.log.Info("worker stopped", "executed", w.executed.Load())
}

// waitFor waits until ch is closed (nil) or ctx ends (its error), whichever
// comes first; a closed ch wins over an ended ctx.
func waitFor(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Worker) fetchLoop(ctx context.Context, p Pool, cons jetstream.Consumer) {
	defer w.fetchers.Done()
	log := w.log.With("pool", p.Name)
	deliver := w.observeDeliveries(p, cons.CachedInfo().Name, (*delivery).handle)
	var inflight atomic.Int64
	freed := make(chan struct{}, 1)
	// free gives a call's slot back: when its handler returns, or when the
	// watchdog abandons its execution.
	release := func() {
		inflight.Add(-1)
		w.inflight.Add(-1)
		w.handlers.Done()
		select {
		case freed <- struct{}{}:
		default:
		}
	}
	for ctx.Err() == nil {
		free := int64(p.Concurrency) - inflight.Load()
		if free <= 0 {
			select {
			case <-freed:
			case <-ctx.Done():
			}
			continue
		}
		// The pull request is never abandoned: a stop waits for it to end
		// (at most FetchWait), since a message the server delivers to an
		// abandoned request waits out AckWait before anyone gets it. (No
		// FetchContext either: the client gives up shortly after the
		// server's expiry and may drop messages still in flight to it.)
		batch, err := cons.Fetch(int(free), jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if consumerGone(err) {
				w.checkConsumers()
			}
			log.Warn("fetch failed", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		for msg := range batch.Messages() {
			inflight.Add(1)
			w.inflight.Add(1)
			w.handlers.Add(1)
			d := &delivery{w: w, pool: &p, msg: msg}
			d.slot.free = release
			w.runners.Go(func() {
				defer d.slot.release()
				deliver(d)
			})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			if consumerGone(err) {
				w.checkConsumers()
			}
			log.Debug("fetch ended", "err", err)
		}
	}
}
