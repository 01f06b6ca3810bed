package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/cliflag"
)

// Main runs the toolwire-bench binary with args and returns its exit code:
// 0 on success, 1 when a measurement fails, 2 on bad flags.
//
// With -suite it runs every level of DefaultLevels and the memory
// measurement and prints a markdown report; otherwise it runs one
// measurement and ends with its RESULT line.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolwire-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var suite, memory, execs, attack, overload bool
	var sc ShapedConfig
	var oc OverloadConfig
	var attackServer, attackMatch, auditClient, logLevel string
	var rounds, auditCalls int
	fs.BoolVar(&suite, "suite", false, "run the whole suite and print a markdown report")
	fs.BoolVar(&execs, "executors", false, "measure each executor type through toolwire against the same work done directly")
	fs.BoolVar(&memory, "memory", false, "measure only the dispatcher's memory per 10k calls in flight")
	fs.BoolVar(&attack, "attack", false, "send hostile requests to a dispatcher process (oversized, deep, wide, compressed) and measure the time to each answer and its memory")
	fs.StringVar(&attackMatch, "attack-match", "", "with -attack: only the attacks whose name contains this")
	fs.StringVar(&attackServer, "attack-server", "", "internal: run the dispatcher side of -attack with its store in this directory")
	fs.BoolVar(&overload, "overload", false, "offer a pool many times its capacity and measure what is accepted, refused, run in time, and how latency recovers")
	overloadFlags(fs, &oc)
	fs.IntVar(&auditCalls, "audit", 0, "measure the audit (records/s, peak memory) over this many calls instead")
	fs.StringVar(&auditClient, "audit-client", "", "internal: run the audit side of -audit against this NATS URL")
	fs.IntVar(&rounds, "rounds", DefaultRounds, "with -suite: rounds of every measurement (the table shows the median)")
	fs.StringVar(&cfg.Path, "path", PathNATS, "path measured: nats, http, mcp, baseline (jetstream-raw, the suite's baseline) or baseline-fetch (jetstream-fetch, the first baseline)")
	fs.BoolVar(&cfg.Policy, "policy", false, "put a 50-rule policy (globs and CEL) in force on the dispatcher")
	fs.BoolVar(&cfg.Hook, "hook", false, "put a policy with one native before-hook on every call in force on the dispatcher")
	fs.BoolVar(&cfg.Limits, "limits", false, "put a policy with one rate limit and one budget on every call in force on the dispatcher")
	fs.BoolVar(&cfg.Sessions, "sessions", false, "name a session in every call (one per caller in flight, each opened in a mode) under a policy that pins versions per session (nats path)")
	shaped := shapedFlags(fs, &sc)
	fs.DurationVar(&cfg.MaxQueueWait, "max-queue-wait", 0, "the dispatcher's bound on a call's expected queue wait (0 = its default, 2s, as in production; a refused call fails the run)")
	fs.IntVar(&cfg.InFlight, "inflight", 64, "calls in flight")
	fs.IntVar(&cfg.Calls, "n", 20000, "calls measured")
	fs.IntVar(&cfg.Warmup, "warmup", 0, "warm-up calls, not measured (0 = n/10, -1 = none)")
	fs.StringVar(&cfg.Conn, "conn", "inprocess", "NATS connections: inprocess or tcp (loopback)")
	fs.StringVar(&cfg.HTTP, "http", "http1", "protocol of the http path: http1 (keep-alive) or h2c")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured calls to this file")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write an allocation profile of the measured calls to this file")
	fs.StringVar(&cfg.Sync, "sync", "1s", "fsync of the embedded store: an interval, or \"always\"")
	fs.StringVar(&cfg.TempDir, "tmp", "", "directory for the servers' stores (default the system's)")
	fs.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	log, code, ok := cliflag.Setup(fs, args, "TOOLWIRE_BENCH_", &logLevel)
	if !ok {
		return code
	}
	cfg.Logger = log
	if err := shapedPath(fs, &cfg, *shaped); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch {
	case execs:
		var pairs []ExecutorPair
		if pairs, err = RunExecutors(ctx, cfg, stderr); err == nil {
			WriteExecutorTable(stdout, pairs)
		}
	case attackServer != "":
		err = AttackServer(ctx, attackServer, stdout, log)
	case attack:
		var rs []AttackResult
		if rs, err = MeasureAttacks(ctx, cfg, attackMatch, stderr); err == nil {
			WriteAttackTable(stdout, rs)
		}
	case auditClient != "":
		err = AuditClient(ctx, auditClient, stdout)
	case overload:
		oc.Config = cfg
		var r OverloadResult
		if r, err = MeasureOverload(ctx, oc, stderr); err == nil {
			WriteOverload(stdout, r)
		}
	case auditCalls > 0:
		var r AuditResult
		if r, err = MeasureAudit(ctx, cfg, auditCalls); err == nil {
			fmt.Fprintln(stdout, "AUDIT", r)
		}
	case *shaped:
		sc.Config = cfg
		var r ShapedResult
		if r, err = MeasureShaped(ctx, sc, stderr); err == nil {
			WriteShaped(stdout, r)
		}
	case suite:
		err = RunSuite(ctx, SuiteConfig{Config: cfg, Rounds: rounds}, stdout, stderr)
	case memory:
		var m Memory
		if m, err = MeasureMemory(ctx, cfg, MemoryCalls); err == nil {
			fmt.Fprintln(stdout, "MEMORY", m)
		}
	default:
		err = measureOne(ctx, cfg, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolwire-bench:", err)
		return 1
	}
	return 0
}

// shapedFlags defines -shaped and its settings on fs.
func shapedFlags(fs *flag.FlagSet, sc *ShapedConfig) (shaped *bool) {
	shaped = fs.Bool("shaped", false, "measure calls with a client profile, a model's toolset and a parent call in force against plain calls on the same stack (the http path), in alternating pairs")
	fs.IntVar(&sc.Pairs, "pairs", DefaultPairs, "with -shaped: pairs of runs (one plain, one shaped each)")
	fs.IntVar(&sc.ChildrenPerParent, "children", MaxChildrenPerParent, "with -shaped: shaped calls on behalf of one parent (1 to 256)")
	return shaped
}

// shapedPath sets the http path for -shaped (when shaped), the only one
// it measures, unless -path named another (an error).
func shapedPath(fs *flag.FlagSet, cfg *Config, shaped bool) error {
	if !shaped {
		return nil
	}
	named := false
	fs.Visit(func(f *flag.Flag) { named = named || f.Name == "path" })
	if named && cfg.Path != PathHTTP {
		return fmt.Errorf("toolwire-bench: -shaped measures the http path (the Connect API: the one face where a profile, a model and a parent apply together), not -path %s", cfg.Path)
	}
	cfg.Path = PathHTTP
	return nil
}

// overloadFlags defines -overload's settings on fs.
func overloadFlags(fs *flag.FlagSet, oc *OverloadConfig) {
	fs.DurationVar(&oc.Service, "overload-service", 20*time.Millisecond, "with -overload: how long each call runs")
	fs.IntVar(&oc.Concurrency, "overload-concurrency", 8, "with -overload: the pool's slots")
	fs.Float64Var(&oc.Factor, "overload-factor", 10, "with -overload: offered load in multiples of the measured capacity")
	fs.DurationVar(&oc.For, "overload-for", 60*time.Second, "with -overload: how long the overload lasts")
	fs.DurationVar(&oc.Recovery, "overload-recovery", 15*time.Second, "with -overload: how long the light load after it lasts")
	fs.DurationVar(&oc.ScheduleToStart, "overload-s2s", 2*time.Second, "with -overload: every call's schedule-to-start (-1s = none: the dispatcher's default bound on queue wait applies)")
	fs.IntVar(&oc.MaxBacklog, "overload-backlog", 0, "with -overload: the dispatcher's pool backlog bound (0 = its default, -1 = none)")
}

// measureOne runs one measurement of cfg and prints its RESULT line to
// stdout, its CPU and allocations per call to stderr.
func measureOne(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	r, err := Measure(ctx, cfg)
	if err != nil {
		return err
	}
	objs, bytes := r.AllocsPerCall()
	fmt.Fprintf(stderr, "%s: %.1f µs of process CPU and %.0f heap allocations (%.0f B) per call; other load on the machine: %.2f cores; %d calls redelivered\n",
		r.System, float64(r.CPUPerCall())/1e3, objs, bytes, r.OtherCores(), r.Redelivered)
	fmt.Fprintln(stdout, r.Line())
	return nil
}
