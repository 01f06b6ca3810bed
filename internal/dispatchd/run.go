package dispatchd

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
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/archive"
	"gocloud.dev/blob"

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
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/startstop"
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
	// MCPProfiles are the client profiles the MCP endpoint (and the
	// Connect API, on request) renders answers with (internal/profiles;
	// --mcp-profiles reads them from a file). Nil = the shipped ones.
	MCPProfiles *profiles.Set
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
	// SigningKey is the file of the dispatcher's signing key (an nkey
	// seed or a PEM Ed25519 key: internal/signing); empty =
	// <DataDir>/credentials/dispatcher-signing.nk, made when missing,
	// with the embedded server, and a new key per process with an
	// external cluster (each enrolled at start).
	SigningKey string
	// WorkerKeys is a directory of worker signing keys, one file per
	// pool (<pool>.pub, or the pool's private key): the keys worker
	// announcements may enrol for their pools (signing.Trust). With the
	// embedded server the local worker key (SigningDir) is trusted too.
	WorkerKeys string
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
	// PoolsCredentials are the pools whose workers get a credential of
	// their own next to the roles' (bus.PoolRole: <DataDir>/credentials/
	// pool-<name>.nk, made once and reused): it reaches that pool's
	// consumers and announcement subjects only, where worker.nk reaches
	// every pool's. A worker with --pool <name> on this machine finds its
	// pool's file first. Needs NATSListen; names must pass
	// bus.ValidatePoolRoles. Empty = none.
	PoolsCredentials []string
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
	// Archive is the archive store (internal/archive): a directory, or a
	// URL such as s3://bucket?region=..., gs://bucket or
	// azblob://container; empty = no archive, and the streams keep their
	// MaxAge (720h) as before.
	Archive string
	// RetentionWindow is how long the calls and results streams keep
	// their messages when Archive is set (bus.Config.RetentionWindow:
	// their MaxAge; the events stream keeps min(72h, window)); older ones
	// are read from the archive. No other store's age changes (sessions,
	// retries, dead letters, blobs keep 720h), and a live stream's longer
	// MaxAge is lowered only by the archiver, once it has archived past
	// the window. Default 168h (7 days); at least 4 × the archive segment
	// (Dispatcher.ArchiveSegment, 1h: 4h), since the archive is normally
	// about a segment behind; refused without Archive.
	RetentionWindow time.Duration
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
	if rc.Archive != "" {
		rc.RetentionWindow = cmp.Or(rc.RetentionWindow, 7*24*time.Hour)
		rc.Bus.RetentionWindow = rc.RetentionWindow
	}
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
	case rc.RetentionWindow != 0 && rc.Archive == "":
		return errors.New("dispatchd: RetentionWindow (--retention-window) needs an archive (--archive): without one the streams would drop what no archive holds")
	case rc.Archive != "" && rc.RetentionWindow < 4*cmp.Or(rc.Dispatcher.ArchiveSegment, time.Hour):
		return fmt.Errorf("dispatchd: RetentionWindow (--retention-window) %s is below 4 × the archive segment (%s): the archive is normally about a segment behind, and a shorter window would hold the streams for good",
			rc.RetentionWindow, cmp.Or(rc.Dispatcher.ArchiveSegment, time.Hour))
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
	log := rc.Logger
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
	pr, err := openProcess(ctx, &rc)
	if err != nil {
		return err
	}
	defer pr.close()
	group, err := pr.services(ctx, rc)
	if err != nil {
		return err
	}
	if err := group.Start(ctx); err != nil {
		return err
	}
	pr.serving(rc)
	select {
	case <-ctx.Done():
	case err := <-pr.http.failed:
		pr.stop(rc, group)
		return fmt.Errorf("dispatch: http: %w", err)
	}
	pr.stop(rc, group)
	return nil
}

// process is what Run opens before anything starts: the files it reads,
// the NATS connection and the layout, the listener, and the parts the
// services are built from.
type process struct {
	log       *slog.Logger
	policyDoc []byte // the --policy file, nil without
	nc        *nats.Conn
	natsConn  bus.ConnConfig // how nc was dialled; its Monitor is nil on the embedded server
	lock      *dataLock      // the embedded server's data directory; nil without
	closeNATS func()
	b         *bus.Bus
	ln        net.Listener
	metrics   *prometheus.Registry
	pools     []string             // the in-process workers' pool types
	worker    *workerconfig.Worker // nil without in-process workers
	workers   *workerService       // worker as a service; nil without
	http      *httpService         // set by services
	ui        *dashboard.Server    // nil with --no-ui
	d         *dispatch.Dispatcher // set by services
	archive   *blob.Bucket         // the archive store; nil without
}

// openProcess reads what a bad start should fail on before anything
// starts (the policy file, the token keys, the encryption key, the
// workers' list), connects to NATS (starting the embedded server),
// opens the layout and listens. The caller closes it.
func openProcess(ctx context.Context, rc *RunConfig) (_ *process, err error) {
	pr := &process{log: rc.Logger, metrics: telemetry.NewRegistry(), closeNATS: func() {}}
	defer func() {
		if err != nil {
			pr.close()
		}
	}()
	if pr.policyDoc, err = readPolicyFile(rc.PolicyFile); err != nil {
		return nil, err
	}
	if rc.ApprovalTokenKeys != "" {
		keys, err := approvals.LoadKeys(rc.ApprovalTokenKeys)
		if err != nil {
			return nil, err
		}
		rc.Dispatcher.TokenKeys = keys
		pr.log.Info("approval tokens on", "keys", keys.String())
	}
	key, err := encryptionKey(*rc)
	if err != nil {
		return nil, err
	}
	if pr.nc, pr.lock, pr.closeNATS, err = pr.connect(ctx, *rc, key); err != nil {
		pr.closeNATS = func() {}
		return nil, err
	}
	signer, trust, err := signingSetup(*rc)
	if err != nil {
		return nil, err
	}
	rc.Dispatcher.WorkerKeys = trust
	if rc.Archive != "" {
		if rc.Dispatcher.Archive, err = archive.OpenBucket(ctx, rc.Archive); err != nil {
			return nil, err
		}
		pr.archive = rc.Dispatcher.Archive
	}
	if pr.b, err = bus.Open(ctx, pr.nc, rc.Bus, bus.Options{Logger: pr.log, Signer: signer}); err != nil {
		return nil, err
	}
	if pr.pools, err = parseWorkers(rc.Workers, rc.NATSURL == ""); err != nil {
		return nil, err
	}
	if len(pr.pools) == 0 {
		// A pool with one enrolled key skips the claim check (internal/
		// believed). Not beside in-process workers: they sign with the
		// dispatcher's key, a second key of their pools the listing does
		// not show.
		pr.b.Keys.ListPoolKeys()
	}
	// Listen before the workers are built: the default configuration's
	// HTTP example tool calls this address.
	if pr.ln, err = net.Listen("tcp", rc.HTTPAddr); err != nil {
		return nil, fmt.Errorf("dispatch: listen %s: %w", rc.HTTPAddr, err)
	}
	return pr, nil
}

// services builds the process's services, in the order they start:
//
//  0. on an external cluster, the connection's watchdog (bus.Watchdog):
//     it moves the connection off a server that went silent or whose
//     JetStream fails, from the first start-up request to the drain;
//  1. the in-process workers: their pool consumers and tool specs exist
//     before the registry's first load and the --policy file's tests;
//  2. the registry's watched copy (the dispatcher's specs);
//  3. the --policy file, applied once;
//  4. the policies in force, unless the configuration brings its own;
//  5. the dispatcher (internal/dispatch: its own services);
//  6. the dashboard's calls index;
//  7. the HTTP server (the API, /mcp, /ui, health and metrics): last, so
//     that nothing is served before every part runs, and nothing that
//     starts after it can fail.
//
// A failed start stops what had started, newest first (the group). The
// graceful stop has an order of its own (stop).
func (pr *process) services(ctx context.Context, rc RunConfig) (*startstop.Group, error) {
	var ss []startstop.Named
	add := func(name string, s startstop.Service) { ss = append(ss, startstop.Named{Name: name, Service: s}) }
	var err error
	if pr.natsConn.Monitor != nil { // an external cluster
		wd, err := bus.NewWatchdog(pr.nc, pr.natsConn, bus.AdmissionWatchdog(pr.b.Config.CallsStream()))
		if err != nil {
			return nil, err
		}
		add("nats watchdog", wd)
		rc.Dispatcher.ConnHealth = wd // a call publish that times out probes the server at once
	}
	if pr.worker, err = newWorkers(ctx, pr.b, rc, pr.pools, pr.ln.Addr().String(), pr.metrics); err != nil {
		return nil, err
	}
	if pr.worker != nil {
		pr.workers = &workerService{w: pr.worker}
		add("workers", pr.workers)
	}
	reg := registry.NewStore(pr.b.Registry, pr.log)
	add("registry", startstop.OwnBudget(reg, rc.Grace))
	if pr.policyDoc != nil {
		add("policy file", &startstop.Funcs{StartFunc: func(ctx context.Context) error {
			return applyPolicyFile(ctx, policyFile{b: pr.b, reg: reg, path: rc.PolicyFile, doc: pr.policyDoc}, pr.log)
		}})
	}
	if rc.Dispatcher.Policies == nil {
		holder := policystore.NewHolder(pr.b, pr.log)
		rc.Dispatcher.Policies = holder
		add("policies", startstop.OwnBudget(holder, rc.Grace))
	}
	if pr.d, err = newDispatcher(pr.b, reg, rc, pr.metrics); err != nil {
		return nil, err
	}
	add("dispatcher", startstop.OwnBudget(pr.d, rc.Grace))
	auth, err := authenticator(rc.APIKeysFile, rc.HTTPAddr, pr.log)
	if err != nil {
		return nil, err
	}
	p := parts{d: pr.d, auth: auth, reg: reg, b: pr.b, metrics: pr.metrics, log: pr.log}
	if pr.ui, err = newDashboard(ctx, rc, p); err != nil {
		return nil, err
	}
	srv, closeMCP, err := newServer(rc, p, pr.ui)
	if err != nil {
		return nil, err
	}
	if pr.ui != nil {
		add("dashboard", startstop.OwnBudget(pr.ui, rc.Grace))
	}
	pr.http = newHTTPService(srv, pr.ln)
	// The other replicas' notifications/cancelled are heard until the
	// requests in flight have drained, so that those can still be cancelled.
	pr.http.afterShutdown = closeMCP
	add("http server", pr.http) // last: nothing after it can fail a start
	return startstop.NewGroup(ss...), nil
}

// serving says where the process serves, once every service runs.
func (pr *process) serving(rc RunConfig) {
	url := "http://" + pr.ln.Addr().String()
	if pr.ui != nil {
		pr.log.Info("dashboard", "url", url+dashboard.Prefix+"/")
	}
	pr.log.Info("toolwire dispatcher serving", "api", url, "dispatcher", pr.d.Name(),
		"nats", cmp.Or(redactedURL(rc.NATSURL), "embedded"), "workers", strings.Join(pr.pools, ","))
	if pr.lock != nil {
		pr.lock.describe(url)
	}
	if rc.Ready != nil {
		rc.Ready <- pr.ln.Addr().String()
	}
}

// stop stops the process gracefully, in this order:
//
//  1. the dashboard (its own budget): its live streams would hold the
//     server's shutdown until the grace period ends;
//  2. the HTTP server's shutdown, which waits for the requests it serves,
//     overlapping with
//  3. the workers' stop (the grace period: gracePeriod; a second interrupt
//     hands the calls in flight back at once), which finishes the calls
//     those requests wait for, and then
//  4. the dispatcher's (its own budget, not cut short by a hurried stop:
//     it has no calls in flight to hand back), which releases callers
//     still waiting in Call (ErrStopped), so that the shutdown ends;
//  5. what is left, newest first (the group: the policies, the
//     registry; the parts stopped above return at once);
//  6. the NATS connection drained within a budget of its own: a worker
//     that gave up on a stuck tool has used up the grace, and closing
//     mid-drain would drop what is being flushed.
func (pr *process) stop(rc RunConfig, group *startstop.Group) {
	sctx, cancel := gracePeriod(rc, pr.worker, rc.Grace, pr.log)
	defer cancel()
	warn := func(what string, err error) {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			pr.log.Warn(what+" stop", "err", err)
		}
	}
	if pr.ui != nil {
		warn("dashboard", startstop.OwnBudget(pr.ui, rc.Grace).Stop(sctx))
	}
	shutdown := make(chan error, 1)
	go func() { shutdown <- pr.http.Stop(sctx) }()
	if pr.workers != nil {
		warn("worker", pr.workers.Stop(sctx))
	}
	warn("dispatcher", startstop.OwnBudget(pr.d, rc.Grace).Stop(sctx))
	warn("http", <-shutdown)
	warn("process", group.Stop(sctx))
	dctx, dcancel := context.WithTimeout(context.Background(), drainTimeout)
	defer dcancel()
	drain(dctx, pr.nc, pr.log)
}

// close closes what openProcess opened (after stop, or on a failed start:
// then the services that had started were stopped by the group).
func (pr *process) close() {
	if pr.workers != nil { // built, but not started or stopped: a failed start
		ctx, cancel := context.WithTimeout(context.Background(), closeWorkersWait)
		defer cancel()
		_ = pr.workers.Stop(ctx)
	}
	if pr.ln != nil {
		_ = pr.ln.Close()
	}
	pr.closeNATS()
	if pr.archive != nil {
		_ = pr.archive.Close()
	}
}

// closeWorkersWait bounds stopping in-process workers that a failed start
// built.
const closeWorkersWait = 10 * time.Second

// workerService is the in-process workers as a startstop.Service: their
// Stop (which also closes their executors) runs once, whether the group
// stops them or a failed start leaves them to close.
type workerService struct {
	w    *workerconfig.Worker
	once sync.Once
	err  error
}

func (s *workerService) Start(ctx context.Context) error { return s.w.Start(ctx) }

func (s *workerService) Stop(ctx context.Context) error {
	s.once.Do(func() { s.err = s.w.Stop(ctx) })
	return s.err
}

// httpService serves the process's HTTP server on its listener as a
// startstop.Service: Stop is the server's graceful Shutdown. A server that
// fails is reported on failed.
type httpService struct {
	srv      *http.Server
	failed   chan error
	shutdown sync.Once
	err      error // the shutdown's
	// afterShutdown, when set, is called once the graceful Shutdown has
	// returned (the requests in flight drained, or ctx ended).
	afterShutdown func()
	startstop.Funcs
}

// newHTTPService serves srv on ln once started.
func newHTTPService(srv *http.Server, ln net.Listener) *httpService {
	h := &httpService{srv: srv, failed: make(chan error, 1)}
	done := make(chan struct{})
	h.StartFunc = func(context.Context) error {
		go func() {
			defer close(done)
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				h.failed <- err
			}
		}()
		return nil
	}
	h.StopFunc = func() <-chan struct{} { return done }
	return h
}

// Stop shuts the server down gracefully (within ctx), then waits for
// its Serve to return.
func (h *httpService) Stop(ctx context.Context) error {
	h.shutdown.Do(func() {
		h.err = h.srv.Shutdown(ctx)
		if h.afterShutdown != nil {
			h.afterShutdown()
		}
	})
	return errors.Join(h.err, h.Funcs.Stop(ctx))
}

// connect opens the process's NATS connection: to the embedded server
// (started here, on <DataDir>/jetstream, after taking the data
// directory's lock) unless rc.NATSURL names an external cluster. The
// returned closeNATS closes the connection, shuts the embedded server down
// and releases the lock, in that order; on an error connect has undone
// what it did. On an external cluster, the connection's disconnects,
// reconnects and moves are logged and counted (toolwire_nats_* on
// /metrics).
func (pr *process) connect(ctx context.Context, rc RunConfig, key string) (*nats.Conn, *dataLock, func(), error) {
	log := pr.log
	if rc.NATSURL != "" {
		pr.natsConn = bus.ConnConfig{URL: rc.NATSURL, CredsFile: rc.NATSCreds, Name: "toolwire-dispatcher",
			Monitor: bus.NewConnMonitor(log.With("component", "nats"))}
		nc, err := bus.Dial(pr.natsConn)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := pr.metrics.Register(telemetry.NewConnCollector(pr.natsConn.Monitor)); err != nil {
			nc.Close()
			return nil, nil, nil, fmt.Errorf("dispatch: metrics: %w", err)
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

// newDispatcher builds the dispatcher core on b with the
// process's logger, tracer and metrics (and every pool's lag and the DLQ
// depth, read at scrape time).
func newDispatcher(b *bus.Bus, reg *registry.Store, rc RunConfig, metrics *prometheus.Registry) (*dispatch.Dispatcher, error) {
	cfg := rc.Dispatcher
	cfg.Logger = cmp.Or(cfg.Logger, rc.Logger)
	cfg.TracerProvider = cmp.Or(cfg.TracerProvider, rc.TracerProvider)
	if cfg.Metrics == nil {
		var err error
		if cfg.Metrics, err = telemetry.NewDispatcherMetrics(metrics); err != nil {
			return nil, err
		}
	}
	// Every pool's lag and the DLQ depth, read at scrape time (cached).
	metrics.MustRegister(&telemetry.StreamStats{Calls: b.Calls, DLQ: b.DLQ, PoolPrefix: b.Config.Prefix + "_pool_"})
	return dispatch.New(b, reg, cfg)
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

// newDashboard builds the dashboard (nil with rc.NoUI) on
// the process's parts: the dispatcher as its Core, and the streams and
// buckets it reads.
func newDashboard(ctx context.Context, rc RunConfig, p parts) (*dashboard.Server, error) {
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
	q.SignWith(p.b.Signer).CheckWith(p.d.CheckRetry) // a retry is decided as an approval is
	ui, err := dashboard.New(dashboard.Config{Core: p.d, Approvals: p.d.Approvals(), Auth: p.auth, Registry: p.reg, Secret: secret,
		Streams: dashboard.Streams{Calls: p.b.Calls, Results: p.b.Results, Events: p.b.Events, Registry: p.b.Registry, Subjects: p.b.Subjects, Audit: src, DLQ: q,
			Revocations: p.b.Revocations, Conn: p.b.NC, ListPoolKeys: p.b.Keys.ListsPoolKeys()},
		IndexCalls: rc.UIIndexCalls, TraceURL: rc.UITraceURL, AgentVisibility: p.d.Config().AgentVisibility, Logger: p.log.With("component", "ui")})
	if err != nil {
		return nil, err
	}
	return ui, nil
}
