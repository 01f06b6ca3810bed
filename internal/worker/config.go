package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
)

// Pool is one worker pool this process serves.
type Pool struct {
	bus.PoolConfig
	// Concurrency is how many calls this process runs at once for the
	// pool; it never fetches more than its free slots. Default 64.
	Concurrency int

	hb *heartbeater // set when the pool is served
}

// SpecSource supplies specs that change while the worker runs, such as
// the tools of an MCP server (*mcp.Executor is one). The worker serves
// Specs() at start and again after every Changed(): it extends its pool
// consumers to new tools first, then swaps the specs it serves, then
// publishes them.
type SpecSource interface {
	Specs() []*toolwirev1.ToolSpec
	Changed() <-chan struct{}
}

// Config configures a Worker.
type Config struct {
	// Name identifies this worker instance in responses and logs. Default
	// the host name plus the process id.
	Name string
	// Pools served; at least one.
	Pools []Pool
	// Executors by type; every pool's type needs one.
	Executors map[toolwirev1.ExecutorType]executors.Executor
	// Specs of the tools this worker serves; published into the registry
	// at start-up. A call for a tool or version not here is refused.
	Specs []*toolwirev1.ToolSpec
	// SpecSources add specs that change at run time (MCP tools).
	SpecSources []SpecSource
	// FetchWait is how long one pull request waits for calls; a stop waits
	// for the current one to end. Default 1s.
	FetchWait time.Duration
	// StartToClose bounds one attempt when neither the call nor the tool
	// says. Default 5m.
	StartToClose time.Duration
	// MaxInlineBytes bounds the encoded response published on the results
	// stream; a larger output goes to the blob store and the inline
	// response is truncated. Default 768 KiB (under NATS' 1 MiB payload).
	MaxInlineBytes int
	// MaxInProcessDelay is the longest retry delay waited for in-process
	// (the call keeps its slot and heartbeats). Longer delays park the call
	// in the retries stream until it is due (retry.go). Default 10s.
	MaxInProcessDelay time.Duration
	// Watchdog is how long an execution may run on after its context ended
	// before it is abandoned (logged, counted, heartbeats stopped so the
	// call is redelivered after AckWait). Default 5s.
	Watchdog time.Duration
	// MaxArgsBytes and MaxArgsDepth repeat the dispatcher's limits for
	// calls that bypass it. Defaults 1 MiB and 64.
	MaxArgsBytes int64
	MaxArgsDepth int
	// NotServedDelay is how long a call for a tool or version this replica
	// does not serve waits before another delivery. Default 1s.
	NotServedDelay time.Duration
	// Shadow makes every pool of this worker a shadow pool: it serves the
	// replays of its tools (toolctl replay) and never live calls, publishes
	// its specs as versions only (the registry's current versions stay
	// those of the live workers), and retries only in-process, so that a
	// replay never reaches a live pool.
	Shadow bool
	// ConsumerCheck is how often the worker compares the live consumer of
	// each pool it serves with the one it declared, and puts back a
	// missing one or one changed by hand (guard.go; another replica's
	// declaration is left); a fetch that finds its consumer gone checks at
	// once. Default 5s.
	ConsumerCheck time.Duration
	// Registry writes the registry for the worker: its pools' claims on
	// their tools' names and their specs, which a Registrar checks and
	// writes. Default a registry.Remote on the worker's connection: a
	// request to the dispatchers (bus.RegistrySubject), retried while none
	// answers. A dispatcher's in-process workers pass its Registrar.
	Registry registry.Writer
	// Logger; default slog.Default(). The worker logs through a
	// telemetry.LogHandler, so lines logged with a call's context carry
	// its trace_id and span_id.
	Logger *slog.Logger
	// TracerProvider makes the worker's spans (one CONSUMER span per
	// delivery, one span per attempt, an execute_tool span per execution;
	// see internal/telemetry). Nil = tracing off: no spans, no header
	// reads, no cost.
	TracerProvider trace.TracerProvider
	// Metrics are the instruments the worker records into (create them
	// with telemetry.NewWorkerMetrics on the registry /metrics serves).
	// Nil = a private, unregistered set.
	Metrics *telemetry.WorkerMetrics
}

// WithDefaults returns a copy of c with zero fields set.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", cmp.Or(host, "worker"), os.Getpid())
	}
	pools := make([]Pool, len(c.Pools))
	for i, p := range c.Pools {
		if c.Shadow {
			// A shadow pool has a consumer of its own, never a live one.
			p.Shadow = true
			if p.Name == "" {
				p.Name = "shadow-" + bus.TypeToken(p.Type)
			}
		}
		p.PoolConfig = p.PoolConfig.WithDefaults()
		p.Concurrency = cmp.Or(p.Concurrency, 64)
		pools[i] = p
	}
	c.Pools = pools
	c.FetchWait = cmp.Or(c.FetchWait, time.Second)
	c.StartToClose = cmp.Or(c.StartToClose, 5*time.Minute)
	c.MaxInlineBytes = cmp.Or(c.MaxInlineBytes, 768<<10)
	c.MaxInProcessDelay = cmp.Or(c.MaxInProcessDelay, 10*time.Second)
	c.Watchdog = cmp.Or(c.Watchdog, 5*time.Second)
	c.MaxArgsBytes = cmp.Or(c.MaxArgsBytes, 1<<20)
	c.MaxArgsDepth = cmp.Or(c.MaxArgsDepth, 64)
	c.NotServedDelay = cmp.Or(c.NotServedDelay, time.Second)
	c.ConsumerCheck = cmp.Or(c.ConsumerCheck, 5*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	if len(c.Pools) == 0 {
		return errors.New("worker: Pools is empty")
	}
	seen := map[string]bool{}
	for _, p := range c.Pools {
		if err := p.PoolConfig.Validate(); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		if seen[p.Name] {
			return fmt.Errorf("worker: pool %q listed twice", p.Name)
		}
		seen[p.Name] = true
		if p.Concurrency < 1 {
			return fmt.Errorf("worker: pool %q: Concurrency %d must be positive", p.Name, p.Concurrency)
		}
		if p.Shadow != c.Shadow {
			return fmt.Errorf("worker: pool %q: Shadow must match the worker's Shadow", p.Name)
		}
		if c.Executors[p.Type] == nil {
			return fmt.Errorf("worker: pool %q: no executor for %s", p.Name, p.Type)
		}
	}
	if c.FetchWait < 100*time.Millisecond {
		return fmt.Errorf("worker: FetchWait %s is below 100ms", c.FetchWait)
	}
	if c.ConsumerCheck < 100*time.Millisecond {
		return fmt.Errorf("worker: ConsumerCheck %s is below 100ms", c.ConsumerCheck)
	}
	if c.MaxInlineBytes < 4096 {
		return fmt.Errorf("worker: MaxInlineBytes %d is below 4096", c.MaxInlineBytes)
	}
	return nil
}
