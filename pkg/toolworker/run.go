package toolworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	"go.opentelemetry.io/otel/trace"
)

// DefaultHTTPAddr is the worker's --http default: loopback only, so the
// worker's metrics and health endpoints are not offered to the network
// unless the operator asks (the Helm chart passes --http=:<httpPort> for
// its probes and scrapes).
const DefaultHTTPAddr = "127.0.0.1:9090"

// Options configure a worker process.
type Options struct {
	// NATSURL of the cluster. Required for Run.
	NATSURL string
	// NATSCreds is a credentials file; optional. Any of: a NATS user
	// credentials file (JWT and nkey seed), an nkey seed file (as a
	// dispatcher with --nats-listen writes), or one "user:password" line.
	// Empty, with NATSURL on loopback: DataDir's worker credentials, if
	// they exist.
	NATSCreds string
	// DataDir is the data directory of a dispatcher on this machine whose
	// embedded server the worker connects to: with NATSCreds empty and
	// NATSURL on loopback, the worker uses <DataDir>/credentials/worker.nk
	// if it exists. Default "data".
	DataDir string
	// SigningKey is the file of the key this worker signs its results and
	// events with (an nkey seed or a PEM Ed25519 private key, mode 0600:
	// internal/signing); the dispatchers enrol its public key for the
	// worker's pools only when their --worker-keys directory holds it.
	// Empty, with the dispatcher's local credentials in use:
	// <DataDir>/credentials/signing/worker-signing.nk, made when missing,
	// which that dispatcher trusts for every pool; otherwise a new key per
	// process, which no dispatcher enrols over NATS (the worker's start-up
	// fails saying so).
	SigningKey string
	// Prefix of the installation's subjects and streams. Default "toolwire".
	Prefix string
	// StreamReplicas of every stream and bucket the worker creates or
	// updates. Default 1; 3 on a JetStream cluster. Every binary of an
	// installation must agree.
	StreamReplicas int
	// Name of this worker instance. Default host name and pid.
	Name string
	// Pools are the executor types served: "native", "mcp", "sandbox",
	// "http". Default ["native"].
	Pools []string
	// Pool names the worker pool: replicas with the same tools share it
	// (one durable consumer); a worker binary with tools of its own should
	// be a pool of its own. Default the type ("native"); with several
	// types, "<Pool>-<type>".
	Pool string
	// Concurrency per pool. Default 64.
	Concurrency int
	// AckWait of the pool consumers. Default 30s.
	AckWait time.Duration
	// MaxDeliver of the pool consumers. Default 5.
	MaxDeliver int
	// Grace is how long a stop waits for in-flight calls. Default 25s.
	Grace time.Duration
	// Shadow makes this a shadow worker: it serves only replays (toolctl
	// replay) of its tools, never live calls, and does not change the
	// registry's current versions. Its pool is "shadow-<type>" unless
	// Pool names it, never a live pool's name (the dispatchers refuse
	// it); it runs with the worker credential and a signing key trusted
	// for the pools whose tools it replays.
	Shadow bool
	// EnsureOnly makes Run create or update the pool consumers and publish
	// the specs, then return without serving or opening HTTPAddr: a
	// deployment step (the Helm chart's ensure Job) for pools that scale to
	// zero, which have no replica to do it when first installed.
	EnsureOnly bool
	// ConfigFile is a worker configuration (YAML: pools, spec files of
	// sandbox and HTTP tools, MCP servers, executor settings; see the
	// README). Empty = native tools only.
	ConfigFile string
	// Tools served by the native pool.
	Tools []*tool.Tool
	// Logger; default slog.Default().
	Logger *slog.Logger
	// HTTPAddr is where Run serves /healthz (alive), /readyz (connected,
	// streams present, pool consumers present as declared, specs
	// published) and /metrics
	// (Prometheus), from before it connects: a worker waiting for its
	// cluster is alive and not ready. Empty = no HTTP server. The --http flag's default is
	// DefaultHTTPAddr, loopback only.
	HTTPAddr string
	// TracerProvider makes the worker's spans. Nil: Run builds one from
	// the standard OTEL_* environment (off unless it names an exporter).
	TracerProvider trace.TracerProvider
	// Metrics registers the worker's Prometheus metrics. Nil: Run uses the
	// registry its /metrics serves.
	Metrics prometheus.Registerer
	// Ready, if set, receives the HTTP address (HTTPAddr resolved, "" with
	// no HTTP server) once the worker serves.
	Ready chan<- string
}

// Run connects to NATS, serves the pools until ctx is done, then stops
// gracefully and drains the connection. Until the worker serves, an
// error that says NATS cannot answer yet (bus.Unavailable: no server
// reachable, no JetStream leader in the cluster) is retried with backoff
// and logged at each retry, for as long as ctx lasts; other errors
// (credentials refused, a pool or tool name another pool holds) end Run
// at once.
func Run(ctx context.Context, o Options) error {
	if o.NATSURL == "" {
		return errors.New("toolworker: a NATS URL is required (--nats-url)")
	}
	if err := checkPool(o); err != nil {
		return err
	}
	log := cmp.Or(o.Logger, slog.Default())
	tracing, err := telemetry.SetupTracing(ctx, "toolwire-worker", nil)
	if err != nil {
		return err
	}
	defer tracing.Flush(log)
	if o.TracerProvider == nil && tracing.Provider != nil {
		o.TracerProvider = tracing.Provider
		log.Info("tracing on", "exporter", tracing.Exporter)
	}
	reg := telemetry.NewRegistry()
	if o.Metrics == nil {
		o.Metrics = reg
	}
	creds := o.NATSCreds
	if creds == "" {
		creds = localCredentials(o, log)
	}
	signer, err := workerKey(o, creds != "" && o.NATSCreds == "")
	if err != nil {
		return err
	}
	cfg := bus.Config{Prefix: o.Prefix, Replicas: o.StreamReplicas}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return err // before any retry: no server makes it valid
	}
	// The HTTP server starts first (alive, not ready) and stops after the
	// worker: a worker waiting for its cluster answers its liveness and
	// startup probes, and /metrics covers the drain. Not for
	// --ensure-only, which never serves.
	var serving atomic.Pointer[workerconfig.Worker]
	ready := func(ctx context.Context) error {
		if w := serving.Load(); w != nil {
			return w.Ready(ctx)
		}
		return errors.New("worker starting: waiting for the NATS cluster")
	}
	stopHTTP, httpAddr := func() {}, ""
	if o.HTTPAddr != "" && !o.EnsureOnly {
		var err error
		if stopHTTP, httpAddr, err = serveHTTP(o.HTTPAddr, telemetry.Mux(ready, reg), log); err != nil {
			return err
		}
	}
	defer func() { stopHTTP() }()
	// Start-up waits for the cluster (untilAvailable): a worker that
	// starts before NATS, or while the cluster has no JetStream leader,
	// retries instead of exiting.
	conn, err := natsConn(o, creds, cfg, log)
	if err != nil {
		return err
	}
	nc, err := dial(ctx, log, conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Bind: the worker attaches to the layout a dispatcher made (worker
	// credentials may not manage streams) and never rewrites its limits.
	var b *bus.Bus
	if err := untilAvailable(ctx, log, "attach to the streams", func() (err error) {
		b, err = bus.Open(ctx, nc, cfg, bus.Options{Bind: true, Logger: log, Signer: signer})
		return err
	}); err != nil {
		return err
	}
	w, err := newWorker(ctx, b, o)
	if err != nil {
		return err
	}
	if o.EnsureOnly {
		return ensureOnly(ctx, w, nc, log, o)
	}
	watchdog, err := startWatchdog(ctx, nc, conn, b.Config)
	if err != nil {
		return err
	}
	defer func() { _ = watchdog.Stop(context.Background()) }()
	if o.HTTPAddr != "" {
		reg.MustRegister(&telemetry.StreamStats{Calls: b.Calls, Consumers: w.PoolConsumers, PoolPrefix: b.Config.Prefix + "_pool_"})
	}
	serving.Store(w)
	if err := untilAvailable(ctx, log, "start the pools", func() error { return w.Start(ctx) }); err != nil {
		return errors.Join(err, w.Stop(context.WithoutCancel(ctx)))
	}
	log.Info("worker serving", "worker", w.Name(), "config", o.ConfigFile, "http", httpAddr)
	if o.Ready != nil {
		o.Ready <- httpAddr
	}
	<-ctx.Done()
	err = stopWorker(w, o)
	stopHTTP()
	stopHTTP = func() {}
	return errors.Join(err, watchdog.Stop(context.Background()), drain(nc))
}

// natsConn is how the worker dials its cluster: as the worker role, with
// a monitor that logs the connection's disconnects, reconnects and moves
// and counts them (toolwire_nats_* on o.Metrics).
func natsConn(o Options, creds string, cfg bus.Config, log *slog.Logger) (bus.ConnConfig, error) {
	conn := bus.ConnConfig{URL: o.NATSURL, CredsFile: creds, Name: "toolwire-worker",
		InboxPrefix: bus.InboxPrefix(cfg, workerRole(o)), Monitor: bus.NewConnMonitor(log.With("component", "nats"))}
	if err := o.Metrics.Register(telemetry.NewConnCollector(conn.Monitor)); err != nil {
		return conn, fmt.Errorf("toolworker: metrics: %w", err)
	}
	return conn, nil
}

// checkPool checks --pool before connecting, as a pool's name
// (bus.ValidPoolName) that fits its one type (bus.CheckPoolName: a name
// "<x>-<type>" runs <type> tools only; with several types the pools are
// "<pool>-<type>"). The rules of pools with a credential of their own
// (bus.ValidatePoolRoles: no "<x>-<type>" name) are the dispatcher's,
// which makes those credentials: a pool named "web-http" that serves HTTP
// tools with the worker credential keeps its name, as through --config.
func checkPool(o Options) error {
	if o.Pool == "" {
		return nil
	}
	if err := bus.ValidPoolName(o.Pool); err != nil {
		return fmt.Errorf("toolworker: --pool: %w", err)
	}
	types := o.Pools
	if len(types) == 0 {
		types = []string{"native"}
	}
	if len(types) != 1 || o.ConfigFile != "" { // --config's pools are checked as it is read
		return nil
	}
	if t, ok := bus.ParseType(strings.TrimSpace(types[0])); ok {
		if err := bus.CheckPoolName(o.Pool, t); err != nil {
			return fmt.Errorf("toolworker: --pool: %w", err)
		}
	}
	return nil
}

// workerRole is the role whose inboxes the worker uses: its pool's
// (bus.PoolRole) with --pool, whose inboxes the worker role may use too;
// the worker role's without.
func workerRole(o Options) string {
	if o.Pool != "" {
		return bus.PoolRole(o.Pool)
	}
	return bus.RoleWorker
}

// localCredentials is the credentials file of a worker on the
// dispatcher's machine: with --pool, the pool's role's if the dispatcher
// made one (--pools-credentials), else the worker role's.
func localCredentials(o Options, log *slog.Logger) string {
	for _, role := range []string{workerRole(o), bus.RoleWorker} {
		if creds := bus.LocalCredentials(o.DataDir, role, o.NATSURL); creds != "" {
			log.Info("using the dispatcher's credentials", "role", role, "file", creds)
			return creds
		}
	}
	return ""
}

// dial connects to the cluster, waiting for it (untilAvailable).
func dial(ctx context.Context, log *slog.Logger, conn bus.ConnConfig) (*nats.Conn, error) {
	var nc *nats.Conn
	err := untilAvailable(ctx, log, "connect to NATS", func() (err error) {
		nc, err = bus.Dial(conn)
		return err
	})
	return nc, err
}

// startWatchdog starts the watchdog of nc (dialled with conn), whose
// JetStream probe asks for the calls stream's info: it moves the
// connection off a server that went silent or whose JetStream fails. Run
// stops it before the drain.
func startWatchdog(ctx context.Context, nc *nats.Conn, conn bus.ConnConfig, cfg bus.Config) (*bus.Watchdog, error) {
	w, err := bus.NewWatchdog(nc, conn, bus.WatchdogConfig{Stream: cfg.CallsStream()})
	if err != nil {
		return nil, err
	}
	return w, w.Start(ctx)
}

// ensureOnly runs w.Ensure, closes the worker's executors and drains the
// connection.
func ensureOnly(ctx context.Context, w *workerconfig.Worker, nc *nats.Conn, log *slog.Logger, o Options) error {
	if o.Shadow {
		return errors.New("toolworker: --ensure-only does not apply to a --shadow worker")
	}
	err := untilAvailable(ctx, log, "ensure the pools", func() error { return w.Ensure(ctx) })
	if err = errors.Join(err, stopWorker(w, o), drain(nc)); err != nil {
		return err
	}
	log.Info("pool consumers ensured and tools published; not serving (--ensure-only)", "worker", w.Name())
	return nil
}

// stopWorker stops w within the grace period (o.Grace, default 25s). Its
// error (the grace period's, when it gave up on a call that would not
// stop) does not end the stop: the connection is still drained.
func stopWorker(w *workerconfig.Worker, o Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.Grace, 25*time.Second))
	defer cancel()
	return w.Stop(ctx)
}

// drain drains nc: what the worker published is flushed before it closes.
func drain(nc *nats.Conn) error {
	if err := nc.Drain(); err != nil {
		return fmt.Errorf("toolworker: drain: %w", err)
	}
	return nil
}

// newWorker builds (without starting) the worker o describes on an open
// bus: o.ConfigFile's configuration, o's pools, tools and observation.
// Pool types without an executor in this build answer their calls with
// PERMANENT errors rather than leaving them queued. ctx bounds start-up
// work such as connecting to MCP servers.
func newWorker(ctx context.Context, b *bus.Bus, o Options) (*workerconfig.Worker, error) {
	var f *workerconfig.File
	if o.ConfigFile != "" {
		var err error
		if f, err = workerconfig.Load(o.ConfigFile); err != nil {
			return nil, err
		}
	}
	pools := o.Pools
	if len(pools) == 0 && f == nil {
		pools = []string{"native"}
	}
	for _, name := range pools {
		if _, ok := bus.ParseType(strings.TrimSpace(name)); !ok {
			return nil, fmt.Errorf("toolworker: unknown pool type %q (want native, mcp, sandbox or http)", name)
		}
	}
	var metrics *telemetry.WorkerMetrics
	if o.Metrics != nil {
		var err error
		if metrics, err = telemetry.NewWorkerMetrics(o.Metrics); err != nil {
			return nil, fmt.Errorf("toolworker: metrics: %w", err)
		}
	}
	return workerconfig.NewWorker(ctx, b, f, workerconfig.Options{Name: o.Name, PoolTypes: pools, Pool: o.Pool,
		Concurrency: o.Concurrency, AckWait: o.AckWait, MaxDeliver: o.MaxDeliver, Shadow: o.Shadow, Tools: o.Tools, Logger: o.Logger,
		TracerProvider: o.TracerProvider, Metrics: metrics})
}

// serveHTTP serves h on addr until the returned stop is called; stop
// shuts the server down (at most 5s) and waits for it. bound is the
// address listened on.
func serveHTTP(addr string, h http.Handler, log *slog.Logger) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("toolworker: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server failed", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, ln.Addr().String(), nil
}

// Start-up retries wait startRetryFirst, doubling up to startRetryMax.
const (
	startRetryFirst = 250 * time.Millisecond
	startRetryMax   = 5 * time.Second
)

// untilAvailable runs step until it succeeds, fails with an error that is
// not bus.Unavailable, or ctx ends; each retry is logged with its error.
func untilAvailable(ctx context.Context, log *slog.Logger, what string, step func() error) error {
	wait := startRetryFirst
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || !bus.Unavailable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("toolworker: stopped before the NATS cluster was ready (%s): %w", what, err)
		}
		// Jitter: replicas restarted together do not retry in step.
		d := wait/2 + rand.N(wait/2+1)
		log.Warn("NATS cluster not ready; retrying worker start-up", "step", what, "attempt", attempt, "retry_in", d.Round(time.Millisecond), "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("toolworker: stopped before the NATS cluster was ready (%s): %w", what, err)
		case <-t.C:
		}
		wait = min(2*wait, startRetryMax)
	}
}

// workerKey is the key the worker signs with (Options.SigningKey); local
// says the dispatcher's local credentials are in use.
func workerKey(o Options, local bool) (*signing.Key, error) {
	switch {
	case o.SigningKey != "":
		return signing.LoadKey(o.SigningKey)
	case local:
		return signing.KeyFile(filepath.Join(bus.SigningDir(cmp.Or(o.DataDir, "data")), signing.LocalWorkerKey))
	}
	return signing.NewKey()
}
