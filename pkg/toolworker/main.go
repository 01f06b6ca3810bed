package toolworker

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/cliflag"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Main runs a worker process serving tools, configured from os.Args and
// the environment, and exits.
func Main(tools ...*tool.Tool) {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	os.Exit(MainArgs(os.Args[1:], os.Stderr, tools...))
}

// MainArgs is Main with explicit arguments and log output; it returns the
// exit code.
func MainArgs(args []string, stderr io.Writer, tools ...*tool.Tool) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	var pools, logLevel string
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS URL(s), comma-separated")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file: a .creds file, an nkey seed file or one user:password line (default with a loopback --nats-url: <data>/credentials/worker.nk if it exists)")
	fs.StringVar(&o.SigningKey, "signing-key", "", "file of this worker's signing key (nkey seed or PEM Ed25519; mode 0600), whose public key the dispatchers' --worker-keys holds for its pool")
	fs.StringVar(&o.DataDir, "data", "data", "data directory of the dispatcher whose embedded NATS this worker uses on this machine (for its credentials)")
	fs.StringVar(&o.Prefix, "prefix", "toolwire", "subject and stream prefix of the installation")
	fs.IntVar(&o.StreamReplicas, "stream-replicas", 1, "replicas of every stream and bucket (3 on a JetStream cluster; every binary of an installation must agree)")
	fs.StringVar(&o.Name, "name", "", "worker instance name (default host name and pid)")
	fs.StringVar(&pools, "pools", "", "executor types served: native,mcp,sandbox,http (default: the config file's pools, or native)")
	fs.StringVar(&o.ConfigFile, "config", "", "worker configuration file (YAML): pools, spec files, MCP servers, executor settings")
	fs.StringVar(&o.Pool, "pool", "", "pool name; replicas serving the same tools share one (default: the type)")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "calls run at once per pool")
	fs.DurationVar(&o.AckWait, "ack-wait", 30*time.Second, "pool consumer AckWait")
	fs.IntVar(&o.MaxDeliver, "max-deliver", 5, "pool consumer MaxDeliver")
	fs.DurationVar(&o.Grace, "grace", 25*time.Second, "shutdown grace period for in-flight calls")
	fs.BoolVar(&o.Shadow, "shadow", false, "serve only replays (toolctl replay) of this worker's tools, never live calls")
	fs.BoolVar(&o.EnsureOnly, "ensure-only", false, "create the pool consumers and publish the tools, then exit without serving (a deployment step for pools that scale to zero)")
	fs.StringVar(&o.HTTPAddr, "http", DefaultHTTPAddr, "serve /healthz, /readyz and /metrics on this address (loopback by default; :9090 for every interface, e.g. for Kubernetes probes); empty = off")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	log, code, ok := cliflag.Setup(fs, args, "TOOLWIRE_", &logLevel)
	if !ok {
		return code
	}
	if pools != "" {
		o.Pools = strings.Split(pools, ",")
	}
	o.Tools, o.Logger = tools, log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, o); err != nil {
		log.Error("worker failed", "err", err)
		return 1
	}
	return 0
}
