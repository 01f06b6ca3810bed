package dispatchd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/configvalue"
	"github.com/toolwire/toolwire/internal/dashboard"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
)

// RunConfig configures a dispatcher process. Run fills its defaults
// (WithDefaults) and refuses it when invalid (Validate).
type RunConfig struct {
	// DataDir holds the embedded server's store. Default "data" (in the
	// working directory).
	DataDir string
	// HTTPAddr serves the API, /healthz, /readyz and /metrics
	// (Prometheus: the dispatcher's, the in-process workers', the pools'
	// lag and the DLQ depth). Default 127.0.0.1:8080.
	HTTPAddr string
	// MCPAllowedOrigins are the browser origins allowed on /mcp besides
	// the endpoint's own (internal/mcpserver). Empty = none.
	MCPAllowedOrigins []string
	// MCPTaskAfter is how long a tools/call of an MCP client that declared
	// the Tasks extension waits before it is answered as a task. 0 = the
	// endpoint's default (1s); negative is refused.
	MCPTaskAfter time.Duration
	// MCPPublicURL is the MCP endpoint's origin as clients reach it.
	// Empty = as each request reached it.
	MCPPublicURL string
	// NoUI turns the dashboard (/ui on the API address) off.
	NoUI bool
	// UISecret refers to the secret that seals dashboard sessions
	// ("file:/path" or "env:NAME", 32 bytes or more): replicas behind one
	// address need the same. Empty = a random one per process.
	UISecret string
	// UIIndexCalls is the most calls the dashboard's calls index keeps
	// (newest first). Default 1,000,000 (callindex.DefaultMax); negative
	// is refused.
	UIIndexCalls int
	// UITraceURL links a call's trace id on the dashboard to a tracing UI
	// (an http(s) URL with {trace_id}); empty = the id only.
	UITraceURL string
	// NATSURL selects an external cluster; empty = the embedded server.
	NATSURL string
	// NATSCreds is the external cluster's credentials file.
	NATSCreds string
	// NATSListen opens a client listener on the embedded server (e.g.
	// 127.0.0.1:4222) for the nats CLI, toolctl's NATS commands and
	// external workers. It always requires credentials: the dispatcher
	// makes one nkey per role (worker, operator) once, under
	// <DataDir>/credentials (see listenerUsers), and reuses them. Empty =
	// no listener (in-process connections only); --nats-listen defaults
	// to DefaultNATSListen.
	NATSListen string
	// Monitor serves the embedded server's monitoring endpoints. Empty =
	// not served.
	Monitor string
	// NATSEncryptionKey refers to the key that encrypts the embedded
	// server's JetStream store at rest (bus.EmbeddedConfig.EncryptionKey):
	// "file:/absolute/path" or "env:NAME", never the key itself. Empty =
	// the store is not encrypted. NATSEncryptionCipher is "chacha"
	// (default) or "aes". Embedded server only: an external cluster
	// encrypts with its own jetstream { key } setting.
	NATSEncryptionKey, NATSEncryptionCipher string
	// SyncInterval of the embedded store; 0 = 1s (the embedded server's
	// default); negative is refused. SyncAlways fsyncs every write.
	SyncInterval time.Duration
	SyncAlways   bool
	// Workers lists the in-process worker pools: "all", "none" or types.
	// Default "all" with the embedded server, "none" with an external one.
	Workers string
	// Concurrency of each in-process pool. 0 = the worker's default per
	// pool type (64; sandbox: twice the CPUs); --concurrency defaults to
	// 64; negative is refused.
	Concurrency int
	// APIKeysFile enables API-key authentication; empty = open access as
	// identity.Default (log warns when the listener is not loopback).
	APIKeysFile string
	// Bus is the JetStream layout (prefix, retention, ...).
	Bus bus.Config
	// Dispatcher settings (name, limits, waits, approvals).
	Dispatcher dispatch.Config
	// ApprovalTokenKeys names the approval token key file
	// (approvals.LoadKeys: "id:base64key" lines, mode 0600 or stricter;
	// the first key signs, every key verifies). Empty = no approval tokens
	// (unless Dispatcher.TokenKeys is set). Every replica must hold the
	// same keys.
	ApprovalTokenKeys string
	// Tools served by in-process native pools.
	Tools []*tool.Tool
	// WorkerConfig configures the in-process workers (the worker's YAML);
	// empty = the built-in examples of every executor type.
	WorkerConfig string
	// PolicyFile, if set, is applied as the installation policy document
	// at start (internal/policystore): in force for every tenant without
	// a document of its own. Run refuses to start when it does not parse,
	// a condition does not compile or its tests fail (the error names the
	// lines). The same document again changes nothing.
	PolicyFile string
	// Grace bounds the graceful stop. Default 25s; negative is refused.
	Grace time.Duration
	// Hurry, if set, ends the graceful stop early once closed (a second
	// Ctrl-C): calls still running are cancelled with the shutdown cause
	// and handed back for redelivery at once.
	Hurry <-chan struct{}
	// Ready, if set, receives the API's listening address once serving.
	Ready chan<- string
	// Logger is the process's. Nil = slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of the dispatcher and its in-process
	// workers. Nil = built from the standard OTEL_* environment (off
	// unless it names an exporter; see telemetry.SetupTracing).
	TracerProvider trace.TracerProvider
}

// WithDefaults returns a copy of rc with every zero field that has a
// default set to it.
func (rc RunConfig) WithDefaults() RunConfig {
	rc.DataDir = cmp.Or(rc.DataDir, "data")
	rc.HTTPAddr = cmp.Or(rc.HTTPAddr, "127.0.0.1:8080")
	rc.UIIndexCalls = cmp.Or(rc.UIIndexCalls, callindex.DefaultMax)
	if rc.Workers == "" {
		rc.Workers = "none" // an external cluster's workers are its own
		if rc.NATSURL == "" {
			rc.Workers = "all"
		}
	}
	rc.Grace = cmp.Or(rc.Grace, 25*time.Second)
	rc.Logger = cmp.Or(rc.Logger, slog.Default())
	return rc
}

// Validate reports the first field of rc that is invalid, naming it (and
// its flag).
func (rc RunConfig) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MCPTaskAfter (--mcp-task-after)", rc.MCPTaskAfter}, {"SyncInterval (--nats-sync)", rc.SyncInterval}, {"Grace (--grace)", rc.Grace}} {
		if d.v < 0 {
			return fmt.Errorf("dispatchd: %s %s is negative", d.name, d.v)
		}
	}
	switch {
	case rc.UIIndexCalls < 0:
		return fmt.Errorf("dispatchd: UIIndexCalls (--ui-index-calls) %d is negative", rc.UIIndexCalls)
	case rc.Concurrency < 0:
		return fmt.Errorf("dispatchd: Concurrency (--concurrency) %d is negative", rc.Concurrency)
	}
	return nil
}

// Run runs a dispatcher process until ctx is done, then stops it in order:
// stop accepting HTTP requests; stop the in-process workers (in-flight
// calls finish within the grace period and their results reach waiting
// callers); release callers still waiting (they fetch results later by
// call id); stop the registry watcher and the policy holder; drain the
// NATS connection; shut the embedded server down.
func Run(ctx context.Context, rc RunConfig) error {
	rc = rc.WithDefaults()
	if err := rc.Validate(); err != nil {
		return err
	}
	log, grace := rc.Logger, rc.Grace
	if rc.TracerProvider == nil {
		tracing, err := telemetry.SetupTracing(ctx, "toolwire-dispatcher", nil)
		if err != nil {
			return err
		}
		defer tracing.Flush(log)
		if tracing.Provider != nil {
			rc.TracerProvider = tracing.Provider
			log.Info("tracing on", "exporter", tracing.Exporter)
		}
	}
	metrics := telemetry.NewRegistry()
	policyDoc, err := readPolicyFile(rc.PolicyFile)
	if err != nil {
		return err
	}
	if rc.ApprovalTokenKeys != "" {
		// Read before anything starts: a bad key file is a bad start.
		keys, err := approvals.LoadKeys(rc.ApprovalTokenKeys)
		if err != nil {
			return err
		}
		rc.Dispatcher.TokenKeys = keys
		log.Info("approval tokens on", "keys", keys.String())
	}
	key, err := encryptionKey(rc)
	if err != nil {
		return err
	}
	nc, lock, closeNATS, err := connect(ctx, rc, key, log)
	if err != nil {
		return err
	}
	defer closeNATS()
	b, err := bus.Open(ctx, nc, rc.Bus, bus.Options{Logger: log})
	if err != nil {
		return err
	}

	pools, err := parseWorkers(rc.Workers, rc.NATSURL == "")
	if err != nil {
		return err
	}
	// Listen before the workers start: the default configuration's HTTP
	// example tool calls this address.
	addr := rc.HTTPAddr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dispatch: listen %s: %w", addr, err)
	}
	defer ln.Close()
	w, err := startWorkers(ctx, b, rc, pools, ln.Addr().String(), metrics, log)
	if err != nil {
		return err
	}
	stopWorker := func(ctx context.Context) {
		if w == nil {
			return
		}
		if err := w.Stop(ctx); err != nil {
			log.Error("worker stop", "err", err)
		}
		w = nil
	}
	defer func() { // on an early return; the graceful stop below stops it first
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		stopWorker(sctx)
	}()

	reg := registry.NewStore(b.Registry, log)
	if err := reg.Start(ctx); err != nil {
		return err
	}
	defer reg.Stop(context.Background())
	if policyDoc != nil {
		if err := applyPolicyFile(ctx, b, reg, rc.PolicyFile, policyDoc, log); err != nil {
			return err
		}
	}
	stopPolicies := func(context.Context) error { return nil }
	if rc.Dispatcher.Policies == nil {
		holder := policystore.NewHolder(b, log)
		if err := holder.Start(ctx); err != nil {
			return err
		}
		stopPolicies = holder.Stop
		defer holder.Stop(context.Background()) // after the dispatcher's stop (deferred below)
		rc.Dispatcher.Policies = holder
	}
	d, err := startDispatcher(ctx, b, reg, rc, metrics, log)
	if err != nil {
		return err
	}
	defer stopDispatcher(d, grace, log)

	auth, err := authenticator(rc.APIKeysFile, addr, log)
	if err != nil {
		return err
	}
	p := parts{d: d, auth: auth, reg: reg, b: b, metrics: metrics, log: log}
	ui, err := startDashboard(ctx, rc, p)
	if err != nil {
		return err
	}
	defer stopDashboard(ui, grace, log) // on an early return; the graceful stop below stops it first
	srv, err := newServer(rc, p, ui)
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if ui != nil {
		log.Info("dashboard", "url", "http://"+ln.Addr().String()+dashboard.Prefix+"/")
	}
	log.Info("toolwire dispatcher serving", "api", "http://"+ln.Addr().String(), "dispatcher", d.Name(),
		"nats", cmp.Or(redactedURL(rc.NATSURL), "embedded"), "workers", strings.Join(pools, ","))
	if lock != nil {
		lock.describe("http://" + ln.Addr().String())
	}
	if rc.Ready != nil {
		rc.Ready <- ln.Addr().String()
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("dispatch: http: %w", err)
	}
	sctx, cancel := gracePeriod(rc, w, grace, log)
	defer cancel()
	shutdownDone := make(chan error, 1)
	stopDashboard(ui, grace, log) // its live streams would hold the shutdown until the grace period ends
	go func() { shutdownDone <- srv.Shutdown(sctx) }()
	stopWorker(sctx)
	// Not cut short by Hurry: the dispatcher has no calls in flight to
	// hand back, only its own goroutines to wait for.
	stopDispatcher(d, grace, log)
	if err := <-shutdownDone; err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		log.Warn("http shutdown", "err", err)
	}
	_ = reg.Stop(context.Background())
	_ = stopPolicies(context.Background())
	// Its own budget: a worker that gave up on a stuck tool has used up
	// sctx, and closing mid-drain would drop what is being flushed.
	dctx, dcancel := context.WithTimeout(context.Background(), drainTimeout)
	defer dcancel()
	drain(dctx, nc, log)
	return nil
}

// connect opens the process's NATS connection: to the embedded server
// (started here, on <DataDir>/jetstream, after taking the data
// directory's lock) unless rc.NATSURL names an external cluster. The
// returned closeNATS closes the connection, shuts the embedded server down
// and releases the lock, in that order; on an error connect has undone
// what it did.
func connect(ctx context.Context, rc RunConfig, key string, log *slog.Logger) (*nats.Conn, *dataLock, func(), error) {
	if rc.NATSURL != "" {
		nc, err := bus.Dial(bus.ConnConfig{URL: rc.NATSURL, CredsFile: rc.NATSCreds, Name: "toolwire-dispatcher"})
		if err != nil {
			return nil, nil, nil, err
		}
		return nc, nil, nc.Close, nil
	}
	dir := rc.DataDir
	// One process per store: a second embedded server on the same
	// directory would corrupt it. Refused before anything is opened.
	lock, err := lockDataDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	users, err := listenerUsers(rc, dir, log)
	if err != nil {
		lock.release()
		return nil, nil, nil, err
	}
	emb, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: filepath.Join(dir, "jetstream"),
		ListenAddr: rc.NATSListen, Users: users, MonitorAddr: rc.Monitor, SyncInterval: rc.SyncInterval, SyncAlways: rc.SyncAlways,
		Logger: log.With("component", "nats-server"), EncryptionKey: key, EncryptionCipher: rc.NATSEncryptionCipher})
	if err != nil {
		lock.release()
		return nil, nil, nil, err
	}
	nc, err := emb.Connect("toolwire-dispatcher")
	if err != nil {
		emb.Shutdown()
		lock.release()
		return nil, nil, nil, err
	}
	log.Info("embedded NATS server started", "data", dir, "client_url", emb.ClientURL(), "monitor", emb.MonitorURL())
	return nc, lock, func() {
		nc.Close()
		emb.Shutdown()
		lock.release()
	}, nil
}

// startDispatcher builds and starts the dispatcher core on b with the
// process's logger, tracer and metrics (and every pool's lag and the DLQ
// depth, read at scrape time).
func startDispatcher(ctx context.Context, b *bus.Bus, reg *registry.Store, rc RunConfig, metrics *prometheus.Registry, log *slog.Logger) (*dispatch.Dispatcher, error) {
	cfg := rc.Dispatcher
	cfg.Logger = cmp.Or(cfg.Logger, log)
	cfg.TracerProvider = cmp.Or(cfg.TracerProvider, rc.TracerProvider)
	if cfg.Metrics == nil {
		var err error
		if cfg.Metrics, err = telemetry.NewDispatcherMetrics(metrics); err != nil {
			return nil, err
		}
	}
	// Every pool's lag and the DLQ depth, read at scrape time (cached).
	metrics.MustRegister(&telemetry.StreamStats{Calls: b.Calls, DLQ: b.DLQ, PoolPrefix: b.Config.Prefix + "_pool_"})
	d, err := dispatch.New(b, reg, cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// stopDispatcher stops d, waiting at most grace for its goroutines: in
// the graceful stop, and again (a no-op then: Stop is idempotent) on an
// early return of Run.
func stopDispatcher(d *dispatch.Dispatcher, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		log.Warn("dispatcher stop", "err", err)
	}
}

// gracePeriod logs the start of the graceful stop and returns its
// context, shared by every step of the stop: the grace period, cut short
// when rc.Hurry is closed (a second interrupt).
func gracePeriod(rc RunConfig, w *workerconfig.Worker, grace time.Duration, log *slog.Logger) (context.Context, context.CancelFunc) {
	inFlight := 0
	if w != nil {
		inFlight = w.InFlight()
	}
	if inFlight > 0 && rc.Hurry != nil {
		log.Info("shutting down: waiting for the calls in flight to finish; interrupt again to hand them back now",
			"in_flight", inFlight, "grace", grace)
	} else {
		log.Info("shutting down", "in_flight", inFlight, "grace", grace)
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	if rc.Hurry != nil {
		go func() { // ends with sctx, at the latest when Run returns
			select {
			case <-rc.Hurry:
				log.Info("shutting down now: handing the calls in flight back for redelivery")
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	return sctx, cancel
}

// drain drains nc, waiting for it until ctx ends.
// drainTimeout bounds the final drain of the process's connection.
const drainTimeout = 5 * time.Second

func drain(ctx context.Context, nc *nats.Conn, log *slog.Logger) {
	if err := nc.Drain(); err != nil {
		log.Warn("nats drain", "err", err)
	}
	for nc.IsDraining() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startDashboard builds and starts the dashboard (nil with rc.NoUI) on
// the process's parts: the dispatcher as its Core, and the streams and
// buckets it reads.
func startDashboard(ctx context.Context, rc RunConfig, p parts) (*dashboard.Server, error) {
	if rc.NoUI {
		return nil, nil
	}
	var secret []byte
	if rc.UISecret != "" {
		v, err := configvalue.ResolveSecret(rc.UISecret)
		if err != nil {
			return nil, fmt.Errorf("dispatchd: --ui-secret: %w", err)
		}
		secret = []byte(v)
	}
	src, err := audit.Open(ctx, p.b.NC, p.b.Config.Prefix)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	q, err := dlq.Open(ctx, p.b.NC, p.b.Config.Prefix)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	ui, err := dashboard.New(dashboard.Config{Core: p.d, Approvals: p.d.Approvals(), Auth: p.auth, Registry: p.reg, Secret: secret,
		Streams:    dashboard.Streams{Calls: p.b.Calls, Results: p.b.Results, Registry: p.b.Registry, Subjects: p.b.Subjects, Audit: src, DLQ: q},
		IndexCalls: rc.UIIndexCalls, TraceURL: rc.UITraceURL, Logger: p.log.With("component", "ui")})
	if err != nil {
		return nil, err
	}
	if err := ui.Start(ctx); err != nil {
		return nil, err
	}
	return ui, nil
}

// stopDashboard stops ui (nil: the dashboard is off), waiting at most
// grace for it: in the graceful stop, and again (a no-op then) on an
// early return of Run.
func stopDashboard(ui *dashboard.Server, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := ui.Stop(ctx); err != nil {
		log.Warn("dashboard stop", "err", err)
	}
}
