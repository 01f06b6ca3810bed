package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/capacity"
	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/hooks"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/limitgate"
	"github.com/toolwire/toolwire/internal/policyops"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/sessionview"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
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

	// tools remembers the tool of calls looked up (callTool).
	tools callTools
	// owners remembers the agent that made calls looked up (callAgent).
	owners callTools
	// parents remembers the parents of delegated calls found published
	// (parents.go).
	parents parentsSeen
	// parentLooks is the reads of parents' records under way
	// (lookParent), by toolKey.
	parentLooks singleflight.Group
	// tombstoneReads, resultReads and chainCounts are the requests the
	// children of one parent admitted at the same time share
	// (groupcommit.go): the reads of its tombstone (by toolKey) and its
	// result (by subject), and the adds to a chain's counters (by
	// subject; waitAll).
	tombstoneReads groupCommit[bool]
	resultReads    groupCommit[bool]
	chainCounts    groupCommit[chainAdd]
	// limits is the limits bucket's stream, looked up once for the
	// listing of delegated calls (limitsStream).
	limitsMu sync.Mutex
	limits   jetstream.Stream
	// latency watches the soft latency budgets of calls admitted here
	// (latencybudget.go).
	latency latencyWatch

	// recheck asks for a look at every waiter's stored result: the
	// results consumer failed, or a result could not be checked.
	recheck chan struct{}

	mu      sync.Mutex
	waiters map[string]*waiter
	waiting int
	stopped bool
	// group is what Start started (lifecycle.go: services); made by the
	// first Start, guarded by mu.
	group *startstop.Group

	// pools is admission's view of the pool consumers (internal/poolview);
	// nil when Config.PoolCheck is negative.
	pools *poolview.Pools

	callsStream    string   // cached: the name is computed from the prefix
	expectCalls    []string // the Nats-Expected-Stream header value; never modified
	delayedRecords *delayed.Queue
	applier        *intents.Applier
	// sessions is admission's view of the sessions' states (ended, mode;
	// internal/sessionview), kept current by a watch of the sessions
	// bucket.
	sessions *sessionview.View

	// policyOps applies and shows the policy documents for the policy
	// RPCs (internal/api; internal/policyops); cfg.Policies is what
	// decides.
	policyOps *policyops.Ops

	tracer  trace.Tracer // nil = tracing off
	metrics *telemetry.DispatcherMetrics

	// approvals is the approval flow (internal/approvalflow; approve.go):
	// the approvals bucket, the grants in force, the sweep.
	approvals *approvalflow.Flow

	// limitGate is the limits step of admission and the concurrency
	// slots of the calls admitted here (internal/limitgate; limits.go).
	limitGate *limitgate.Gate

	// hooks runs the hooks the policy binds (hooks.go), and serves the
	// workers' after-hook requests while the dispatcher runs.
	hooks *hooks.Hooks

	// reconnected is closed, and replaced, whenever the connection is
	// back after a disconnect (results.go: recheckOnFailures): a call
	// publish awaiting its acknowledgement then publishes again at once
	// rather than waiting out its timeout (awaitCall).
	reconnected atomic.Pointer[chan struct{}]

	// unconfirmed republishes calls whose publish was not acknowledged
	// by the admission horizon (unconfirmed.go).
	unconfirmed *republisher

	caps callerCaps     // per-caller Watches and waiting requests
	load *poolview.Load // pool backlogs and store use, for admission (internal/poolview)
	// capacity samples the stores' use and growth for the metrics
	// (internal/capacity).
	capacity *capacity.Sampler
	// keyStream is the idempotency bucket's stream, looked up by the
	// first release of a key (releaseKey).
	keyStream atomic.Pointer[keyStreamOf]
	// beforePurge, when set (a test), runs before a released key's purge;
	// an error stands for the purge's (purgeKey).
	beforePurge atomic.Pointer[func() error]
	// beforeFinish, when set (a test), runs before an approved call is
	// finished; an error stops the finishing there, as a replica that
	// stopped right after the decision would.
	beforeFinish atomic.Pointer[func() error]
	// archive reads the archive store (Config.Archive; findResult,
	// archivedCall); nil without one.
	archive *archive.Reader
	// lag is how far behind the archive is, read for admission and the
	// metrics (archivelag.go); nil without an archive store.
	lag *archiveLag
	// lookResult is loadResult; a test replaces it to pin an interleaving
	// the server's asynchronous store makes rare.
	lookResult func(ctx context.Context, subject, tool string) (*toolwirev1.ToolResponse, error)
}

// New returns a Dispatcher over b and the registry store reg (which the
// caller starts and stops).
func New(b *bus.Bus, reg *registry.Store, cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dw := b.Config.DuplicateWindow; dw < 2*cfg.PublishHorizon {
		// A call is published again until half the window has passed.
		return nil, fmt.Errorf("dispatch: the calls stream's duplicate window %s is less than twice PublishHorizon %s", dw, cfg.PublishHorizon)
	}
	metrics := cfg.Metrics
	if metrics == nil {
		var err error
		if metrics, err = telemetry.NewDispatcherMetrics(nil); err != nil {
			return nil, fmt.Errorf("dispatch: metrics: %w", err)
		}
	}
	d := &Dispatcher{recheck: make(chan struct{}, 1), bus: b, reg: reg, cfg: cfg, subj: b.Subjects, callsStream: b.Config.CallsStream(), expectCalls: []string{b.Config.CallsStream()},
		delayedRecords: delayed.NewQueue(cfg.AcceptedRecordDelay), applier: intents.NewApplier(b.Sessions, intents.ApplierConfig{}),
		log:     telemetry.WithTraceIDs(cfg.Logger).With("component", "dispatcher", "dispatcher", cfg.Name),
		waiters: map[string]*waiter{}, tracer: telemetry.Tracer(cfg.TracerProvider), metrics: metrics}
	d.chainCounts.waitAll = true // a caller's add must be known to be taken back (countChild)
	d.lookResult = d.loadResult
	d.archive = newArchiveReader(cfg)
	if cfg.Archive != nil {
		d.lag = newArchiveLag(d)
		metrics.ObserveArchiveLag(d.lag.lags)
	}
	sv, err := sessionview.New(sessionview.Config{Sessions: b.Sessions, Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	d.sessions = sv
	d.unconfirmed = &republisher{d: d}
	first := make(chan struct{})
	d.reconnected.Store(&first)
	flow, err := approvalflow.New(b, approvalCore{d}, approvalflow.Config{TTL: cfg.ApprovalTTL, GrantTTL: cfg.GrantTTL,
		Retention: cfg.ApprovalRetention, Sweep: cfg.ApprovalSweep, FinishTimeout: cfg.PublishHorizon + 15*time.Second,
		TokenKeys: cfg.TokenKeys, Logger: d.log, BeforeFinish: func() error {
			if hook := d.beforeFinish.Load(); hook != nil { // a test's (StopAfterNextApprovals)
				return (*hook)()
			}
			return nil
		}})
	if err != nil {
		return nil, fmt.Errorf("dispatch: approval flow: %w", err)
	}
	d.approvals = flow
	ops, err := policyops.New(policyops.Config{Documents: policystore.NewStore(b, d.log), Policies: cfg.Policies, Specs: reg,
		Grants: d.approvals.Grants(), Approvals: d.approvals, Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	d.policyOps = ops
	lc := limitgate.Config{JetStream: b.JS, Policies: cfg.Policies, Specs: reg, Logger: d.log}
	if b.Limits != nil {
		lc.Bucket = b.Limits.Bucket()
	}
	gate, err := limitgate.New(lc)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	d.limitGate = gate
	if cfg.PoolCheck > 0 {
		if d.pools, err = poolview.NewPools(poolview.PoolsConfig{Bus: b, Every: cfg.PoolCheck, Logger: d.log}); err != nil {
			return nil, fmt.Errorf("dispatch: %w", err)
		}
	}
	hs, err := newHooks(d)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	d.hooks = hs
	if d.load, err = poolview.NewLoad(poolview.LoadConfig{Bus: b, Refresh: cfg.LoadRefresh, MaxBacklog: cfg.MaxBacklog,
		PoolMaxBacklog: cfg.PoolMaxBacklog, MaxQueueWait: cfg.MaxQueueWait, PoolMaxQueueWait: cfg.PoolMaxQueueWait,
		StoreHighWater: cfg.StoreHighWater, Logger: d.log}); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	metrics.ObserveLoad(d.load.Metrics)
	if d.capacity, err = capacity.NewSampler(capacity.SamplerConfig{JetStream: b.JS, Bus: b.Config, HighWater: cfg.StoreHighWater, Logger: d.log}); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	metrics.ObserveCapacity(d.capacity.Metrics)
	metrics.ObserveWaiting(func() float64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		return float64(d.waiting)
	})
	return d, nil
}

// Name is the replica's routing name.
func (d *Dispatcher) Name() string { return d.cfg.Name }

// flush makes sure the server has processed our subscriptions.
func flush(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return nc.FlushWithContext(ctx)
}

// Config returns the dispatcher's configuration, defaults filled in.
func (d *Dispatcher) Config() Config { return d.cfg }

// Tasks is the bucket of the MCP endpoint's tasks (bus.Bus.Tasks).
func (d *Dispatcher) Tasks() jetstream.KeyValue { return d.bus.Tasks }
