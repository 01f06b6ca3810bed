package bench

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// The measurable paths.
const (
	PathNATS = "nats"
	PathHTTP = "http"
	// PathBaseline is jetstream-raw, the baseline every toolwire path is
	// reported against: the round trip on nats.go's jetstream package
	// alone, its worker one Consume callback.
	PathBaseline = "baseline"
	// PathBaselineFetch is jetstream-fetch, the first baseline (until
	// 2026-11-30 named jetstream-baseline): the same round trip with the
	// toolwire worker's Fetch loop, a goroutine per call and a
	// synchronous result publish.
	PathBaselineFetch = "baseline-fetch"
	// PathMCP is tools/call through the dispatcher's MCP endpoint (/mcp),
	// by the official Go SDK's client at the 2026-07-28 revision, over
	// the same HTTP as PathHTTP.
	PathMCP = "mcp"
)

// Config configures one measurement.
type Config struct {
	// Path measured: PathNATS, PathHTTP, PathMCP, PathBaseline or
	// PathBaselineFetch. Required.
	Path string
	// InFlight is how many calls are outstanding at once. Default 64.
	InFlight int
	// Calls measured. Default 20000.
	Calls int
	// Warmup calls run before the measured ones and not counted. Default
	// Calls/10; -1 = none.
	Warmup int
	// Conn is how clients reach the embedded server: "inprocess" (default)
	// or "tcp" (a loopback listener).
	Conn string
	// HTTP is the protocol of the http path: "http1" (default: HTTP/1.1
	// keep-alive with a connection per call in flight, what pkg/client
	// uses by default) or "h2c" (HTTP/2 with prior knowledge, what
	// pkg/client uses for gRPC).
	HTTP string
	// CPUProfile, if set, is a file that receives a CPU profile of the
	// measured calls (not of set-up or warm-up; with -overload, of the
	// overload phase).
	CPUProfile string
	// MemProfile, if set, is a file that receives an allocation profile
	// (pprof "allocs", every allocation sampled) of the measured calls.
	MemProfile string
	// TempDir holds the servers' store directories, each removed after its
	// measurement. Default os.TempDir().
	TempDir string
	// Sync is the embedded store's fsync policy: an interval such as "1s"
	// (the default, what the dispatcher's --nats-sync defaults to) or
	// "always" (fsync every write).
	Sync string
	// Policy puts the 50-rule policy (policytest.FiftyRules, globs and CEL
	// conditions; the benchmark call is allowed after 20 rules are
	// evaluated) in force on the dispatcher.
	Policy bool
	// Limits puts a policy with one rate limit and one budget on every
	// call (per agent: the bench's one caller, so every call counts on the
	// same two keys of the limits bucket), never reached, in force.
	Limits bool
	// Hook puts a policy with one native before-hook on every call in
	// force (its cost is a second call through the fleet per call).
	Hook bool
	// Sessions makes every call name one of InFlight sessions, each
	// opened in a mode, under a policy that pins spec versions per
	// session and admits only opened sessions (sessionsPolicy): the
	// session step, the mode's layer and the pins in force (the nats
	// path).
	Sessions bool
	// MaxQueueWait is the dispatcher's bound on a call's expected queue
	// wait (dispatch.Config.MaxQueueWait). Default 0: the dispatcher's own
	// default (2s), as a production dispatcher has; the package's tests
	// set a minute, so that a pool slowed by a loaded test host is not
	// answered OVERLOADED (a refused call fails the run).
	MaxQueueWait time.Duration
	// Logger receives the components' logs. Default: warnings and errors
	// to stderr.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set.
func (c Config) WithDefaults() Config {
	c.InFlight = cmp.Or(c.InFlight, 64)
	c.Calls = cmp.Or(c.Calls, 20000)
	if c.Warmup == 0 {
		c.Warmup = c.Calls / 10
	}
	c.Conn = cmp.Or(c.Conn, "inprocess")
	c.HTTP = cmp.Or(c.HTTP, "http1")
	c.TempDir = cmp.Or(c.TempDir, os.TempDir())
	c.Sync = cmp.Or(c.Sync, "1s")
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Path != PathNATS && c.Path != PathHTTP && c.Path != PathMCP && !c.baseline():
		return fmt.Errorf("bench: Path %q must be nats, http, mcp, baseline or baseline-fetch", c.Path)
	case c.InFlight < 1:
		return fmt.Errorf("bench: InFlight %d must be positive", c.InFlight)
	case c.Calls < 1:
		return fmt.Errorf("bench: Calls %d must be positive", c.Calls)
	case c.Warmup < -1:
		return fmt.Errorf("bench: Warmup %d must be positive, 0 or -1", c.Warmup)
	case c.Conn != "inprocess" && c.Conn != "tcp":
		return fmt.Errorf("bench: Conn %q must be inprocess or tcp", c.Conn)
	case c.HTTP != "h2c" && c.HTTP != "http1":
		return fmt.Errorf("bench: HTTP %q must be h2c or http1", c.HTTP)
	case c.Sync != "always" && !positiveDuration(c.Sync):
		return fmt.Errorf("bench: Sync %q must be a positive duration or always", c.Sync)
	case c.TempDir == "":
		return errors.New("bench: TempDir is empty")
	}
	return nil
}

// workerConcurrency is the in-process pool's size for a measurement:
// never the limit.
func (c Config) workerConcurrency() int { return max(64, c.InFlight) }

// The baselines' system names.
const (
	systemRaw   = "jetstream-raw"
	systemFetch = "jetstream-fetch"
)

// baseline reports whether c measures a baseline, not toolwire.
func (c Config) baseline() bool { return c.Path == PathBaseline || c.Path == PathBaselineFetch }

// system is the name a measurement reports.
func (c Config) system() string {
	switch c.Path {
	case PathBaseline:
		return systemRaw
	case PathBaselineFetch:
		return systemFetch
	}
	if c.Policy {
		return "toolwire-" + c.Path + "+policy"
	}
	if c.Limits {
		return "toolwire-" + c.Path + "+limits"
	}
	if c.Hook {
		return "toolwire-" + c.Path + "+hook"
	}
	if c.Sessions {
		return "toolwire-" + c.Path + "+sessions"
	}
	return "toolwire-" + c.Path
}

func positiveDuration(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}
