package dispatchd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/cliflag"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Main runs the dispatcher binary with args and returns its exit code: 0
// after a clean stop, 1 on a runtime error, 2 on bad flags.
func Main(args []string, stderr io.Writer, tools []*tool.Tool) int {
	fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rc RunConfig
	var logLevel, sync string
	defineFlags(fs, &rc, &logLevel, &sync)
	log, code, ok := cliflag.Setup(fs, args, "TOOLWIRE_", &logLevel)
	if !ok {
		return code
	}
	var err error
	if sync == "always" {
		rc.SyncAlways = true
	} else if rc.SyncInterval, err = parseDuration(sync); err != nil {
		fmt.Fprintf(stderr, "dispatcher: --nats-sync: %v\n", err)
		return 2
	}
	if k := rc.NATSEncryptionKey; k != "" && !strings.HasPrefix(k, "file:") && !strings.HasPrefix(k, "env:") {
		// Not echoed: it may be the key itself.
		fmt.Fprintln(stderr, "dispatcher: --nats-encryption-key: want file:/path or env:NAME, never the key itself (the value is not shown)")
		return 2
	}
	if k := rc.UISecret; k != "" && !strings.HasPrefix(k, "file:") && !strings.HasPrefix(k, "env:") {
		fmt.Fprintln(stderr, "dispatcher: --ui-secret: want file:/path or env:NAME, never the secret itself (the value is not shown)")
		return 2
	}
	if rc.NATSListen == "none" || rc.NATSURL != "" {
		rc.NATSListen = "" // an external server has its own listeners
	}
	rc.Logger, rc.Tools = log, tools
	// The first SIGTERM or SIGINT starts the graceful stop; a second one
	// ends it at once (Hurry: running calls are handed back).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry, done := make(chan struct{}), make(chan struct{})
	rc.Hurry = hurry
	go func() { // owned: ends when Run has returned
		for _, next := range []func(){cancel, func() { close(hurry) }} {
			select {
			case <-sigs:
				next()
			case <-done:
				return
			}
		}
	}()
	err = Run(ctx, rc)
	close(done)
	var perr *PolicyError
	if errors.Is(err, ErrDataDirInUse) || errors.As(err, &perr) {
		fmt.Fprintf(stderr, "dispatcher: %v\n", err)
		return 1
	}
	if err != nil {
		log.Error("dispatcher failed", "err", err)
		return 1
	}
	return 0
}

// defineFlags defines the dispatcher's flags on fs, into rc, logLevel and
// sync (--nats-sync, read by Main).
func defineFlags(fs *flag.FlagSet, rc *RunConfig, logLevel, sync *string) {
	fs.StringVar(&rc.DataDir, "data", "data", "data directory of the embedded NATS server")
	fs.StringVar(&rc.HTTPAddr, "http", "127.0.0.1:8080", "API listen address")
	fs.StringVar(&rc.NATSURL, "nats-url", "", "external NATS URL(s); empty = embedded server")
	fs.StringVar(&rc.NATSCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&rc.Workers, "workers", "", "in-process worker pools: all, none or native,mcp,sandbox,http (default all when embedded, none otherwise)")
	fs.StringVar(&rc.WorkerConfig, "worker-config", "", "configuration of the in-process workers (the worker YAML); default: the built-in examples of every executor type")
	fs.IntVar(&rc.Concurrency, "concurrency", 64, "calls run at once per in-process pool")
	fs.StringVar(&rc.NATSListen, "nats-listen", DefaultNATSListen, "client listener of the embedded server (\"none\" = in-process connections only); it requires the credentials made once under <data>/credentials (worker.nk, operator.nk, pool-<name>.nk of --pools-credentials), which toolctl and workers on this machine find themselves")
	fs.Func("pools-credentials", "pools whose workers get a NATS credential of their own, comma-separated (<data>/credentials/pool-<name>.nk: that pool's consumers only; a worker with --pool <name> on this machine finds it); needs --nats-listen", func(v string) error {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				rc.PoolsCredentials = append(rc.PoolsCredentials, p)
			}
		}
		return bus.ValidatePoolRoles(rc.PoolsCredentials)
	})
	fs.StringVar(&rc.Monitor, "monitor", "", "serve the embedded server's monitoring endpoints, e.g. 127.0.0.1:8222")
	fs.StringVar(sync, "nats-sync", "1s", "embedded store fsync: an interval, or \"always\"")
	fs.StringVar(&rc.NATSEncryptionKey, "nats-encryption-key", "", "encrypt the embedded store at rest with the key in file:/path or env:NAME (never the key itself)")
	fs.StringVar(&rc.NATSEncryptionCipher, "nats-encryption-cipher", "", "cipher of --nats-encryption-key: chacha (default) or aes")
	fs.StringVar(&rc.APIKeysFile, "api-keys", "", "API key file (YAML); empty = open access as the default tenant")
	fs.Func("agent-visibility", "which calls of its tenant a key sees, on every face: tenant (every call of the tenant; the default) or own (its own agent's calls; keys with the admin or approve scope see the whole tenant)", func(v string) error {
		rc.Dispatcher.AgentVisibility = identity.Visibility(v)
		return rc.Dispatcher.AgentVisibility.Validate()
	})
	fs.DurationVar(&rc.MCPTaskAfter, "mcp-task-after", time.Second, "how long a tools/call of an MCP client that declared the Tasks extension waits for the result before it is answered as a task (docs/mcp.md, \"Tasks\")")
	fs.Func("mcp-profiles", "client profiles file (YAML): how answers are rendered for each kind of MCP client, tried before the shipped chatgpt, claude, vscode, cursor and plain (docs/mcp.md, \"Client profiles\"); empty = the shipped ones", func(v string) error {
		if v == "" { // the shipped ones (nil), as without the flag
			rc.MCPProfiles = nil
			return nil
		}
		var err error
		rc.MCPProfiles, err = profiles.Load(v)
		return err
	})
	fs.Func("mcp-public-url", "the MCP endpoint's origin as clients reach it (scheme://host[:port], e.g. behind a TLS proxy), named in its OAuth protected resource metadata; empty = as each request reached it", func(v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(v, "#") {
			return fmt.Errorf("%q is not an origin (scheme://host[:port])", v)
		}
		rc.MCPPublicURL = u.Scheme + "://" + u.Host
		return nil
	})
	fs.Func("mcp-allowed-origins", "browser origins (scheme://host[:port], comma-separated) allowed on /mcp besides the endpoint's own", func(v string) error {
		for o := range strings.SplitSeq(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				u, err := url.Parse(o)
				if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
					return fmt.Errorf("%q is not an origin (scheme://host[:port])", o)
				}
				rc.MCPAllowedOrigins = append(rc.MCPAllowedOrigins, strings.TrimSuffix(o, "/"))
			}
		}
		return nil
	})
	fs.BoolVar(&rc.NoUI, "no-ui", false, "do not serve the dashboard at /ui on the API address (docs/dashboard.md)")
	fs.StringVar(&rc.UISecret, "ui-secret", "", "the secret that seals dashboard sessions, in file:/path or env:NAME (32 bytes or more; replicas behind one address need the same); empty = random per process")
	fs.StringVar(&rc.UITraceURL, "ui-trace-url", "", "link a call's trace id on the dashboard to a tracing UI: an http(s) URL with {trace_id}, e.g. https://jaeger.example/trace/{trace_id}")
	fs.IntVar(&rc.UIIndexCalls, "ui-index-calls", 1000000, "most calls the dashboard's calls index keeps in memory, newest first (about 180 bytes each: 170 MiB at the default)")
	fs.StringVar(&rc.Bus.Prefix, "prefix", "toolwire", "subject and stream prefix of the installation")
	fs.IntVar(&rc.Bus.Replicas, "stream-replicas", 1, "replicas of every stream and bucket (3 on a JetStream cluster; every binary of an installation must agree)")
	fs.StringVar(&rc.Dispatcher.Name, "name", "", "dispatcher replica name (default host name + random suffix)")
	fs.Int64Var(&rc.Dispatcher.MaxRequestBytes, "max-request-bytes", 0, "largest API request body, in bytes, refused with resource_exhausted while read (0 = the argument limit plus 64 KiB: 327680)")
	fs.IntVar(&rc.Dispatcher.MaxArgsValues, "max-args-values", 2048, "most object members and array elements in a call's arguments (and, plus 64, in an API request)")
	fs.DurationVar(&rc.Dispatcher.WatchGrace, "watch-grace", 5*time.Second, "how long Watch waits for the first record of a call that has none yet before answering not_found")
	fs.IntVar(&rc.Dispatcher.MaxWatchesPerCaller, "max-watches-per-caller", 100, "concurrent Watches per caller (tenant and agent) on this replica; -1 = no cap")
	fs.IntVar(&rc.Dispatcher.MaxWaitingPerCaller, "max-waiting-per-caller", 10000, "callers per caller identity waiting in Call or GetResult on this replica; -1 = no cap")
	fs.IntVar(&rc.Dispatcher.MaxDelegationDepth, "max-delegation-depth", 8, "most calls above a delegated call in its chain (parent_call_id); deeper is refused PERMISSION_DENIED (at most 64)")
	fs.IntVar(&rc.Dispatcher.MaxDelegationFanOut, "max-delegation-fan-out", 256, "most calls made on behalf of one parent call; more are refused PERMISSION_DENIED (at most 4096)")
	fs.IntVar(&rc.Dispatcher.MaxDelegationDescendants, "max-delegation-descendants", 1024, "most calls in one delegation chain (below its root call); more are refused PERMISSION_DENIED (at most 4096)")
	fs.IntVar(&rc.Dispatcher.MaxBacklog, "max-backlog", 10000, "calls queued or running per pool past which new calls are refused OVERLOADED; -1 = no bound")
	fs.Func("pool-max-backlog", "per-pool --max-backlog, e.g. sandbox=200,mcp=5000 (-1 = no bound)", func(s string) error {
		m, err := parsePoolBacklog(s)
		rc.Dispatcher.PoolMaxBacklog = m
		return err
	})
	fs.DurationVar(&rc.Dispatcher.MaxQueueWait, "max-queue-wait", 2*time.Second, "longest expected queue wait a call without a schedule-to-start is admitted for, or 3 times its pool's typical call time when longer; a call its pool would start later is refused OVERLOADED with retry_after; negative = no bound")
	fs.Func("pool-max-queue-wait", "per-pool bound on queue wait in place of --max-queue-wait and its scaling, e.g. sandbox=2m,mcp=500ms (at least 100ms; negative = no bound)", func(s string) error {
		m, err := parsePoolQueueWait(s)
		rc.Dispatcher.PoolMaxQueueWait = m
		return err
	})
	fs.DurationVar(&rc.Dispatcher.LoadRefresh, "load-refresh", 500*time.Millisecond, "how often the pools' backlogs are read for admission")
	fs.DurationVar(&rc.Bus.IdempotencyTTL, "idempotency-ttl", 0, "how long an idempotency key stays bound to its call (a repeat answers that call); 0 = the calls' retention (720h), and at most that; at least the duplicate window (10m)")
	fs.StringVar(&rc.Archive, "archive", "", "archive store of the calls, results and events (docs/reliability.md, \"The record lasts\"): a URL such as s3://bucket?region=eu-west-1, gs://bucket or azblob://container that every replica shares, or a directory (one replica only); empty = no archive (streams keep 720h)")
	fs.DurationVar(&rc.RetentionWindow, "retention-window", 0, "with --archive, how long the streams keep calls and results before only the archive holds them; 0 = 168h (7 days); at least 4h (4 × the archive's 1h segments)")
	fs.Func("stream-max-bytes", "byte limits of the streams and buckets, e.g. results=8GiB,blobs=1GiB (stores: "+strings.Join(bus.StoreNames(), ", ")+"; -1 = unbounded)", rc.Bus.ParseMaxBytes)
	fs.Float64Var(&rc.Bus.DesignRate, "design-rate", 0, "calls a second the installation is sized for: the calls, results and events streams and the idempotency bucket, where --stream-max-bytes does not size them, hold their retention window at that rate (about 400-500 bytes a call each; docs/reliability.md, \"Sized by the window\"); 0 = the fixed defaults")
	fs.StringVar(&rc.PolicyFile, "policy", "", "policy document (YAML) applied at start as the installation's, in force for every tenant without its own; the dispatcher does not start when it does not parse or its tests fail")
	fs.DurationVar(&rc.Dispatcher.InputTTL, "input-ttl", time.Hour, "how long after a tool asked its caller for input a call may answer it (docs/mcp.md, \"Tools that ask for input\")")
	fs.DurationVar(&rc.Dispatcher.ApprovalTTL, "approval-ttl", 24*time.Hour, "how long a call parked for approval waits for an approver before it expires (EXPIRED); also the life of an approval token")
	fs.DurationVar(&rc.Dispatcher.GrantTTL, "grant-ttl", 24*time.Hour, "life of a grant (approve --for session|agent|tenant) whose approver gave no --ttl")
	fs.StringVar(&rc.SigningKey, "signing-key", "", "file of the dispatcher's signing key (nkey seed or PEM Ed25519; mode 0600); empty = <data>/credentials/dispatcher-signing.nk, made when missing")
	fs.StringVar(&rc.WorkerKeys, "worker-keys", "", "directory of worker signing keys, one file per pool (<pool>.pub, or the pool's private key): the keys workers may sign their results with")
	fs.StringVar(&rc.ApprovalTokenKeys, "approval-token-keys", "", "file of approval token keys, one \"id:base64key\" a line (mode 0600; the first signs, all verify; the same file on every replica); empty = no tokens")
	fs.DurationVar(&rc.Grace, "grace", 25*time.Second, "graceful shutdown period")
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
}

// parsePoolBacklog reads "pool=N,pool=N".
func parsePoolBacklog(s string) (map[string]int, error) {
	m := map[string]int{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		pool, n, ok := strings.Cut(part, "=")
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil || v == 0 || v < -1 {
			return nil, fmt.Errorf("%q: want pool=N, N positive or -1", part)
		}
		m[strings.TrimSpace(pool)] = v
	}
	return m, nil
}

// parsePoolQueueWait reads "pool=DURATION,pool=DURATION".
func parsePoolQueueWait(s string) (map[string]time.Duration, error) {
	m := map[string]time.Duration{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		pool, v, ok := strings.Cut(part, "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if pool = strings.TrimSpace(pool); !ok || pool == "" || err != nil || (d >= 0 && d < 100*time.Millisecond) {
			return nil, fmt.Errorf("%q: want pool=DURATION, at least 100ms or negative (no bound)", part)
		}
		m[pool] = d
	}
	return m, nil
}

// DefaultNATSListen is the embedded server's client listener unless
// --nats-listen says otherwise: loopback only, with credentials, so that
// `toolctl audit`, `dlq` and `replay` and workers on this machine work
// with no flag.
const DefaultNATSListen = "127.0.0.1:4222"

func parseDuration(s string) (d time.Duration, err error) {
	d, err = time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s must be positive", s)
	}
	return d, err
}
