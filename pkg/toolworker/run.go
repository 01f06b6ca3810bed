package toolworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Options configure a worker process.
type Options struct {
	// NATSURL of the cluster. Required for Run.
	NATSURL string
	// NATSCreds is a credentials file; optional.
	NATSCreds string
	// Prefix of the installation's subjects and streams. Default "toolwire".
	Prefix string
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
	// registry's current versions.
	Shadow bool
	// ConfigFile is a worker configuration (YAML: pools, spec files of
	// sandbox and HTTP tools, MCP servers, executor settings; see the
	// README). Empty = native tools only.
	ConfigFile string
	// Tools served by the native pool.
	Tools []*tool.Tool
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Run connects to NATS, serves the pools until ctx is done, then stops
// gracefully and drains the connection.
func Run(ctx context.Context, o Options) error {
	if o.NATSURL == "" {
		return errors.New("toolworker: a NATS URL is required (--nats-url)")
	}
	log := cmp.Or(o.Logger, slog.Default())
	nc, err := bus.Dial(bus.ConnConfig{URL: o.NATSURL, CredsFile: o.NATSCreds, Name: "toolwire-worker"})
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := bus.Open(ctx, nc, bus.Config{Prefix: o.Prefix}, bus.Options{})
	if err != nil {
		return err
	}
	w, err := NewWorker(ctx, b, o)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	log.Info("worker serving", "worker", w.Name(), "config", o.ConfigFile)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.Grace, 25*time.Second))
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		return err
	}
	if err := nc.Drain(); err != nil {
		return fmt.Errorf("toolworker: drain: %w", err)
	}
	return nil
}

// Worker is a worker built by NewWorker: Start it, Stop it with a context
// whose deadline is the grace period.
type Worker interface {
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// NewWorker builds (without starting) a worker on an open bus. Pool types
// without an executor in this build answer their calls with PERMANENT
// errors rather than leaving them queued. ctx bounds start-up work such
// as connecting to MCP servers.
func NewWorker(ctx context.Context, b *bus.Bus, o Options) (Worker, error) {
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
	return workerconfig.NewWorker(ctx, b, f, workerconfig.Options{Name: o.Name, PoolTypes: pools, Pool: o.Pool,
		Concurrency: o.Concurrency, AckWait: o.AckWait, MaxDeliver: o.MaxDeliver, Shadow: o.Shadow, Tools: o.Tools, Logger: o.Logger})
}
