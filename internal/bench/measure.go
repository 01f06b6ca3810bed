package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/policy"
	workerpkg "github.com/toolwire/toolwire/internal/worker"
)

// Measure runs one measurement of cfg.Path on a fresh embedded server and
// stops everything it started before it returns.
func Measure(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	var p payloads
	if cfg.baseline() {
		var err error
		if p, err = capturePayloads(ctx, cfg); err != nil {
			return Result{}, err
		}
	}
	return measure(ctx, cfg, p)
}

// measure is Measure with the baseline's payloads already captured.
func measure(ctx context.Context, cfg Config, p payloads) (r Result, err error) {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, e.close()) }()

	var call callFunc
	var pool jetstream.Consumer
	// Every system warms up for at least minWarmup (see below).
	warmUntil := time.Now().Add(minWarmup)
	if cfg.baseline() {
		b, err := startBaseline(ctx, e, p)
		if err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, b.stop()) }()
		call, pool = b.call, b.cons
	} else {
		o := stackOptions{worker: cfg.workerConcurrency(), http: cfg.Path == PathHTTP || cfg.Path == PathMCP, mcp: cfg.Path == PathMCP,
			maxQueueWait: cfg.MaxQueueWait}
		if cfg.Policy {
			if o.policy, err = benchPolicy(); err != nil {
				return r, err
			}
		}
		if cfg.Hook {
			if o.policy, err = policy.Parse([]byte(hookPolicy)); err != nil {
				return r, fmt.Errorf("bench: hook policy: %w", err)
			}
		}
		if cfg.Limits {
			if o.policy, err = policy.Parse([]byte(limitsPolicy)); err != nil {
				return r, fmt.Errorf("bench: limits policy: %w", err)
			}
		}
		if cfg.Sessions {
			if o.policy, err = policy.Parse([]byte(sessionsPolicy)); err != nil {
				return r, fmt.Errorf("bench: sessions policy: %w", err)
			}
		}
		s, err := startStack(ctx, e, o)
		if err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, s.stop()) }()
		call = s.callNATS
		if s.warmUntil.After(warmUntil) {
			warmUntil = s.warmUntil
		}
		switch cfg.Path {
		case PathHTTP:
			call = s.callHTTP
		case PathMCP:
			call = s.callMCP
		}
		if cfg.Sessions {
			if call, err = s.inSessions(ctx, cfg.InFlight); err != nil {
				return r, err
			}
		}
		if pool, err = s.bus.Calls.Consumer(ctx, s.bus.Config.PoolConsumer("native")); err != nil {
			return r, err
		}
	}

	return measured{cfg: cfg, system: cfg.system(), call: call, pool: pool, warmUntil: warmUntil}.run(ctx)
}

// measured is one measured run on a system already started.
type measured struct {
	cfg    Config // InFlight, Calls, Warmup and the profiles' files
	system string
	call   callFunc
	// pool is the pool consumer whose state explains a failed run.
	pool jetstream.Consumer
	// warmUntil is the earliest end of the warm-up.
	warmUntil time.Time
}

// run warms up, then measures m.cfg.Calls calls of m.call.
func (m measured) run(ctx context.Context) (r Result, err error) {
	cfg := m.cfg
	// Warm-up: cfg.Warmup calls, and on for at least minWarmup and until the
	// worker's start-up window has passed (the steady state is measured,
	// not a worker's first second). Every system warms up for the same
	// minimum time, so each starts its measurement with about a second's
	// worth of calls stored, whose index the server keeps in memory (a
	// larger live heap makes every GC cycle dearer).
	for n := cfg.Warmup; n > 0; n = cfg.InFlight * 16 {
		if _, _, err := drive(ctx, cfg.InFlight, n, m.call); err != nil {
			return r, fmt.Errorf("bench: %s warm-up: %w%s", m.system, err, redeliveries(ctx, m.pool))
		}
		if !time.Now().Before(m.warmUntil) {
			break
		}
	}
	stopProfile, err := startProfile(cfg.CPUProfile, cfg.MemProfile)
	if err != nil {
		return r, err
	}
	meter := startCPU()
	lat, wall, err := drive(ctx, cfg.InFlight, cfg.Calls, m.call)
	cpu := meter.since()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return r, fmt.Errorf("bench: %s: %w%s", m.system, err, redeliveries(ctx, m.pool))
	}
	r = summarise(m.system, cfg.InFlight, lat, wall, cpu)
	if info, err := m.pool.Info(ctx); err == nil {
		r.Redelivered = info.NumRedelivered
	}
	return r, nil
}

// minWarmup is the shortest warm-up of any system: the worker's start-up
// window (worker.ClockSkew).
const minWarmup = workerpkg.ClockSkew

// redeliveries explains a failed run with the pool consumer's state: a
// call redelivered during a benchmark was lost by a worker for AckWait.
func redeliveries(ctx context.Context, pool jetstream.Consumer) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	info, err := pool.Info(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (pool consumer: %d calls redelivered, %d awaiting ack, %d pending)",
		info.NumRedelivered, info.NumAckPending, info.NumPending)
}

// startProfile starts a CPU profile into cpuPath and an allocation profile
// into memPath ("" = none) and returns the function that ends them.
//
// The allocation profile samples every allocation from here on (the
// process's earlier allocations were sampled at the default rate and
// weigh little against a measurement's).
func startProfile(cpuPath, memPath string) (func() error, error) {
	stop := func() error { return nil }
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("bench: cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, errors.Join(fmt.Errorf("bench: cpu profile: %w", err), f.Close())
		}
		stop = func() error {
			pprof.StopCPUProfile()
			return f.Close()
		}
	}
	if memPath == "" {
		return stop, nil
	}
	f, err := os.Create(memPath)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: allocation profile: %w", err), stop())
	}
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	stopCPU := stop
	return func() error {
		runtime.GC() // the profile shows allocations as of the last GC
		err := pprof.Lookup("allocs").WriteTo(f, 0)
		runtime.MemProfileRate = rate // after: the profile's scale is the rate when written
		return errors.Join(stopCPU(), err, f.Close())
	}, nil
}
