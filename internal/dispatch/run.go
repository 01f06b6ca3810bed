package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/settings"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
	"go.opentelemetry.io/otel/trace"
)

// RunConfig configures a dispatcher process.
type RunConfig struct {
	// DataDir holds the embedded server's store. Default "./data".
	DataDir string
	// HTTPAddr serves the API, /healthz, /readyz and /metrics
	// (Prometheus: the dispatcher's, the in-process workers', the pools'
	// lag and the DLQ depth). Default 127.0.0.1:8080.
	HTTPAddr string
	// NATSURL selects an external cluster; empty = the embedded server.
	NATSURL string
	// NATSCreds is the external cluster's credentials file.
	NATSCreds string
	// NATSListen opens a client listener on the embedded server (e.g.
	// 127.0.0.1:4222) for the nats CLI, toolctl's NATS commands and
	// external workers. It always requires credentials: the dispatcher
	// makes one nkey per role (worker, operator) once, under
	// <DataDir>/credentials (see listenerUsers), and reuses them.
	NATSListen string
	// Monitor serves the embedded server's monitoring endpoints.
	Monitor string
	// NATSEncryptionKey refers to the key that encrypts the embedded
	// server's JetStream store at rest (bus.EmbeddedConfig.EncryptionKey):
	// "file:/absolute/path" or "env:NAME", never the key itself. Empty =
	// the store is not encrypted. NATSEncryptionCipher is "chacha"
	// (default) or "aes". Embedded server only: an external cluster
	// encrypts with its own jetstream { key } setting.
	NATSEncryptionKey, NATSEncryptionCipher string
	// SyncInterval of the embedded store; 0 = 1s. SyncAlways fsyncs every write.
	SyncInterval time.Duration
	SyncAlways   bool
	// Workers lists the in-process worker pools: "all", "none" or types.
	// Default "all" with the embedded server, "none" with an external one.
	Workers string
	// Concurrency of each in-process pool. Default 64.
	Concurrency int
	// APIKeysFile enables API-key authentication; empty = open access as
	// DefaultIdentity (log warns when the listener is not loopback).
	APIKeysFile string
	// Bus is the JetStream layout (prefix, retention, ...).
	Bus bus.Config
	// Dispatcher settings (name, limits, waits).
	Dispatcher Config
	// Tools served by in-process native pools.
	Tools []*tool.Tool
	// WorkerConfig configures the in-process workers (the worker's YAML);
	// empty = the built-in examples of every executor type.
	WorkerConfig string
	// Grace bounds the graceful stop. Default 25s.
	Grace time.Duration
	// Hurry, if set, ends the graceful stop early once closed (a second
	// Ctrl-C): calls still running are cancelled with the shutdown cause
	// and handed back for redelivery at once.
	Hurry <-chan struct{}
	// Ready, if set, receives the API's listening address once serving.
	Ready  chan<- string
	Logger *slog.Logger
	// TracerProvider makes the spans of the dispatcher and its in-process
	// workers. Nil = built from the standard OTEL_* environment (off
	// unless it names an exporter; see telemetry.SetupTracing).
	TracerProvider trace.TracerProvider
}

// Run runs a dispatcher process until ctx is done, then stops it in order:
// stop accepting HTTP requests; stop the in-process workers (in-flight
// calls finish within the grace period and their results reach waiting
// callers); release callers still waiting (they fetch results later by
// call id); stop the registry watcher; drain the NATS connection; shut the
// embedded server down.
func Run(ctx context.Context, rc RunConfig) error {
	log := cmp.Or(rc.Logger, slog.Default())
	grace := cmp.Or(rc.Grace, 25*time.Second)
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
	var nc *nats.Conn
	var emb *bus.Embedded
	var err error
	key, err := encryptionKey(rc)
	if err != nil {
		return err
	}
	var lock *dataLock
	if rc.NATSURL == "" {
		dir := cmp.Or(rc.DataDir, "data")
		// One process per store: a second embedded server on the same
		// directory would corrupt it. Refused before anything is opened.
		if lock, err = lockDataDir(dir); err != nil {
			return err
		}
		defer lock.release()
		users, err := listenerUsers(rc, dir, log)
		if err != nil {
			return err
		}
		emb, err = bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: filepath.Join(dir, "jetstream"),
			ListenAddr: rc.NATSListen, Users: users, MonitorAddr: rc.Monitor, SyncInterval: rc.SyncInterval, SyncAlways: rc.SyncAlways,
			Logger: log.With("component", "nats-server"), EncryptionKey: key, EncryptionCipher: rc.NATSEncryptionCipher})
		if err != nil {
			return err
		}
		defer emb.Shutdown()
		if nc, err = emb.Connect("toolwire-dispatcher"); err != nil {
			return err
		}
		log.Info("embedded NATS server started", "data", dir, "client_url", emb.ClientURL(), "monitor", emb.MonitorURL())
	} else {
		if nc, err = bus.Dial(bus.ConnConfig{URL: rc.NATSURL, CredsFile: rc.NATSCreds, Name: "toolwire-dispatcher"}); err != nil {
			return err
		}
	}
	defer nc.Close()
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
	addr := cmp.Or(rc.HTTPAddr, "127.0.0.1:8080")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dispatch: listen %s: %w", addr, err)
	}
	defer ln.Close()
	var w toolworker.Worker
	if len(pools) > 0 {
		wm, err := telemetry.NewWorkerMetrics(metrics)
		if err != nil {
			return err
		}
		if w, err = startWorkers(ctx, b, rc, pools, ln.Addr().String(), wm, log); err != nil {
			return err
		}
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
	defer reg.Stop()
	rc.Dispatcher.Logger = cmp.Or(rc.Dispatcher.Logger, log)
	rc.Dispatcher.TracerProvider = cmp.Or(rc.Dispatcher.TracerProvider, rc.TracerProvider)
	if rc.Dispatcher.Metrics == nil {
		if rc.Dispatcher.Metrics, err = telemetry.NewDispatcherMetrics(metrics); err != nil {
			return err
		}
	}
	// Every pool's lag and the DLQ depth, read at scrape time (cached).
	metrics.MustRegister(&telemetry.StreamStats{Calls: b.Calls, DLQ: b.DLQ, PoolPrefix: b.Config.Prefix + "_pool_"})
	d, err := New(b, reg, rc.Dispatcher)
	if err != nil {
		return err
	}
	if err := d.Start(ctx); err != nil {
		return err
	}
	defer d.Stop()

	auth, err := authenticator(rc.APIKeysFile, addr, log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	path, h := NewService(d).Handler(auth)
	if rc.TracerProvider != nil {
		h = telemetry.ExtractHTTP(h) // a caller's traceparent parents the admission span
	}
	mux.Handle(path, h)
	mux.Handle("/healthz", telemetry.Healthz())
	mux.Handle("/readyz", telemetry.Readyz(func(ctx context.Context) error {
		select {
		case <-reg.Ready():
		default:
			return errors.New("registry loading")
		}
		if !nc.IsConnected() {
			return errors.New("nats disconnected")
		}
		return telemetry.StreamsPresent(ctx, b.Calls, b.Results, b.Events, b.DLQ, b.Retries)
	}))
	mux.Handle("/metrics", telemetry.MetricsHandler(metrics))
	// Every route's body is bounded while read, not only the API's.
	srv := &http.Server{Handler: LimitBody(mux, d.cfg.MaxRequestBytes), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
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
	inFlight := 0
	if f, ok := w.(interface{ InFlight() int }); ok {
		inFlight = f.InFlight()
	}
	if inFlight > 0 && rc.Hurry != nil {
		log.Info("shutting down: waiting for the calls in flight to finish; interrupt again to hand them back now",
			"in_flight", inFlight, "grace", grace)
	} else {
		log.Info("shutting down", "in_flight", inFlight, "grace", grace)
	}
	// The graceful stop's context, shared by every step below: the grace
	// period, cut short by Hurry.
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
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
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.Shutdown(sctx) }()
	stopWorker(sctx)
	d.Stop()
	if err := <-shutdownDone; err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		log.Warn("http shutdown", "err", err)
	}
	reg.Stop()
	if err := nc.Drain(); err != nil {
		log.Warn("nats drain", "err", err)
	}
	for nc.IsDraining() {
		select {
		case <-sctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// listenerUsers returns the users of the embedded server's client
// listener: none without one; otherwise the managed credentials under
// <dir>/credentials, made on the first start with a listener and reused
// after (bus.EnsureCredentials), with the permissions of their roles for
// this installation's prefix. It logs where the credentials are (never
// the secrets), and warns when the listener is not on loopback: the
// credentials guard it, but NATS traffic is not encrypted.
func listenerUsers(rc RunConfig, dir string, log *slog.Logger) ([]bus.User, error) {
	if rc.NATSListen == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(rc.NATSListen)
	if err != nil {
		return nil, fmt.Errorf("dispatch: --nats-listen %q: %w", rc.NATSListen, err)
	}
	creds, created, err := bus.EnsureCredentials(bus.CredentialsDir(dir))
	if err != nil {
		return nil, err
	}
	users, err := creds.Users(rc.Bus)
	if err != nil {
		return nil, err
	}
	attrs := []any{"listen", rc.NATSListen}
	for _, role := range bus.Roles() {
		attrs = append(attrs, role+"_credentials", bus.CredentialsFile(creds.Dir, role))
	}
	if len(created) > 0 {
		attrs = append(attrs, "created", strings.Join(created, ","))
	}
	log.Info("NATS client listener requires credentials: workers use --nats-creds <worker file>, toolctl finds the operator file under the data directory", attrs...)
	if !bus.IsLoopbackHost(host) {
		log.Warn("NATS client listener is not on loopback: clients need credentials, but NATS traffic (calls, arguments, results) is not encrypted; use it on a trusted network only", "listen", rc.NATSListen)
	}
	return users, nil
}

// startWorkers builds and starts the in-process workers: from
// rc.WorkerConfig, or the default configuration (every built-in example;
// an executor that cannot start on this host is reported and its calls
// answered, the others still served).
func startWorkers(ctx context.Context, b *bus.Bus, rc RunConfig, pools []string, httpAddr string, wm *telemetry.WorkerMetrics, log *slog.Logger) (toolworker.Worker, error) {
	o := workerconfig.Options{PoolTypes: pools, Concurrency: rc.Concurrency, Tools: rc.Tools, Logger: log,
		TracerProvider: rc.TracerProvider, Metrics: wm}
	var f *workerconfig.File
	if rc.WorkerConfig != "" {
		var err error
		if f, err = workerconfig.Load(rc.WorkerConfig); err != nil {
			return nil, err
		}
	} else {
		f, o.SpecDirs = workerconfig.Default(httpAddr, log)
		o.BestEffort = true
	}
	w, err := workerconfig.NewWorker(ctx, b, f, o)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nil, errors.Join(err, w.Stop(sctx))
	}
	return w, nil
}

// encryptionKey resolves rc.NATSEncryptionKey; errors name the reference,
// never the key.
func encryptionKey(rc RunConfig) (string, error) {
	if rc.NATSEncryptionKey == "" {
		return "", nil
	}
	if rc.NATSURL != "" {
		return "", errors.New("dispatch: an encryption key applies to the embedded server only; encrypt an external cluster with its jetstream { key } setting")
	}
	key, err := settings.ResolveSecret(rc.NATSEncryptionKey)
	if err != nil {
		return "", fmt.Errorf("dispatch: NATS encryption key: %w", err)
	}
	return key, nil
}

func parseWorkers(s string, embedded bool) ([]string, error) {
	if s == "" {
		if !embedded {
			return nil, nil
		}
		s = "all"
	}
	switch s {
	case "none":
		return nil, nil
	case "all":
		return []string{"native", "mcp", "sandbox", "http"}, nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if _, ok := bus.ParseType(p); !ok {
			return nil, fmt.Errorf("dispatch: --workers: unknown type %q (want all, none or native,mcp,sandbox,http)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func authenticator(file, addr string, log *slog.Logger) (Authenticator, error) {
	if file != "" {
		return LoadAPIKeys(file)
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("no API keys configured: every caller is the default tenant with every scope; set --api-keys on a shared network", "http", addr)
	}
	return OpenAccess{Identity: DefaultIdentity}, nil
}

func redactedURL(u string) string {
	if u == "" {
		return ""
	}
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "redacted" + u[i:]
		}
	}
	return u
}
