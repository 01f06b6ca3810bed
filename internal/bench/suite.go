package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// Level is one number of calls in flight of the suite, with how many calls
// each run at that level measures.
type Level struct {
	InFlight, Calls, Warmup int
}

// DefaultLevels keep the whole suite (five rounds) to about three minutes
// on an idle 2-core machine. The level the goal is judged at (64 in
// flight) runs longest: a burst of other load on a shared machine then
// weighs less in any one run.
var DefaultLevels = []Level{
	{InFlight: 1, Calls: 5000, Warmup: 500},
	{InFlight: 64, Calls: 60000, Warmup: 6000},
	{InFlight: 1024, Calls: 30000, Warmup: 6000},
}

// DefaultRounds is how many rounds the suite runs of every measurement.
const DefaultRounds = 5

// MemoryCalls is how many calls the suite holds in flight to measure the
// dispatcher's memory.
const MemoryCalls = 10000

// SuiteConfig configures RunSuite.
type SuiteConfig struct {
	// Config is the template of every measurement; its Path, InFlight,
	// Calls and Warmup are set per run.
	Config
	// Levels measured. Default DefaultLevels.
	Levels []Level
	// Rounds of every measurement; each level's rounds run interleaved
	// (jetstream-raw, jetstream-fetch, nats, ..., jetstream-raw, ...) and
	// the table reports the median run. Default DefaultRounds.
	Rounds int
	// MemoryCalls held in flight for the memory measurement. Default
	// MemoryCalls.
	MemoryCalls int
	// Shaped is the level of the shaped measurement (MeasureShaped).
	// Default DefaultShapedLevel.
	Shaped Level
	// ShapedPairs of runs of the shaped measurement. Default
	// DefaultPairs.
	ShapedPairs int
}

// row is the median run of one system at one level, and the spread.
type row struct {
	Result
	minCPS, maxCPS float64
	// failed runs, left out of the median.
	failed int
}

// RunSuite measures both baselines and every toolwire path at every level,
// then the dispatcher's memory and the shaped calls' cost (MeasureShaped),
// and writes a markdown report to out.
// Progress and each run's RESULT line go to progress. A failed run (a
// call that did not answer) is reported in the table and returned as an
// error after the report; the other runs go on.
func RunSuite(ctx context.Context, sc SuiteConfig, out, progress io.Writer) error {
	cfg := sc.Config
	cfg.Path = PathBaseline
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	levels := sc.Levels
	if len(levels) == 0 {
		levels = DefaultLevels
	}
	rounds := cmp.Or(sc.Rounds, DefaultRounds)
	start := time.Now()
	p, err := capturePayloads(ctx, cfg)
	if err != nil {
		return err
	}
	// The nats path runs five times: without a policy, with the 50-rule
	// policy in force (Config.Policy), with a rate limit and a budget on
	// every call (Config.Limits), with one native before-hook
	// (Config.Hook) and with sessions, a mode and pins in force
	// (Config.Sessions), interleaved like the rest.
	// Every system is reported against jetstream-raw (PathBaseline);
	// jetstream-fetch, the first baseline, runs too, so that the figures
	// measured against it before (BENCHMARKS.md) can be related to these.
	systems := []Config{{Path: PathBaseline}, {Path: PathBaselineFetch}, {Path: PathNATS}, {Path: PathNATS, Policy: true}, {Path: PathNATS, Limits: true},
		{Path: PathNATS, Hook: true}, {Path: PathNATS, Sessions: true}, {Path: PathHTTP}, {Path: PathMCP}}
	var rows []row
	var failures []error
	for _, l := range levels {
		runs := make([][]Result, len(systems))
		for range rounds {
			for i, sys := range systems {
				c := cfg
				c.Path, c.Policy, c.Limits, c.Hook, c.Sessions = sys.Path, sys.Policy, sys.Limits, sys.Hook, sys.Sessions
				c.InFlight, c.Calls, c.Warmup = l.InFlight, l.Calls, l.Warmup
				// Every run starts from a collected heap, so none pays for
				// the garbage of the run before it.
				runtime.GC()
				r, err := measure(ctx, c, p)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					// A failed run is reported, not hidden; the suite goes on.
					fmt.Fprintln(progress, "FAILED", err)
					failures = append(failures, err)
					continue
				}
				fmt.Fprintf(progress, "# %s inflight=%d: %.1f µs CPU/call, other load %.2f cores, %d redelivered\n",
					r.System, r.InFlight, float64(r.CPUPerCall())/1e3, r.OtherCores(), r.Redelivered)
				fmt.Fprintln(progress, r.Line())
				runs[i] = append(runs[i], r)
			}
		}
		for i, rs := range runs {
			if len(rs) == 0 {
				rows = append(rows, row{Result: Result{System: systems[i].system(), InFlight: l.InFlight}, failed: rounds})
				continue
			}
			r := median(rs)
			r.failed = rounds - len(rs)
			rows = append(rows, r)
		}
	}
	var mems []Memory
	for range rounds {
		m, err := measureMemory(ctx, cfg, p, cmp.Or(sc.MemoryCalls, MemoryCalls))
		if err != nil {
			return err
		}
		fmt.Fprintln(progress, "MEMORY", m)
		mems = append(mems, m)
	}
	slices.SortFunc(mems, func(a, b Memory) int { return cmp.Compare(a.DispatcherHeap(), b.DispatcherHeap()) })
	shaped, err := suiteShaped(ctx, sc, cfg, progress)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		fmt.Fprintln(progress, "FAILED", err)
		failures = append(failures, err)
	}

	fmt.Fprintf(out, "toolwire-bench -suite: %s, GOMAXPROCS=%d, NATS connections %s, HTTP %s, median of %d rounds, took %s\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), cfg.Conn, cfg.HTTP, rounds, time.Since(start).Round(time.Second))
	writeTable(out, rows)
	writeAgainstRaw(out, rows)
	writePolicyCost(out, rows)
	fmt.Fprintf(out, "\nMemory (median of %d): %s\n", rounds, mems[len(mems)/2])
	if len(shaped.Plain) > 0 {
		fmt.Fprintln(out)
		WriteShaped(out, shaped)
	}
	for _, err := range failures {
		fmt.Fprintf(out, "\nFAILED RUN: %v\n", err)
	}
	return errors.Join(failures...)
}

// suiteShaped runs the suite's shaped measurement (sc.Shaped, or
// DefaultShapedLevel) with cfg's settings; nothing measured on error.
func suiteShaped(ctx context.Context, sc SuiteConfig, cfg Config, progress io.Writer) (ShapedResult, error) {
	l := sc.Shaped
	if l == (Level{}) {
		l = DefaultShapedLevel
	}
	cfg.InFlight, cfg.Calls, cfg.Warmup = l.InFlight, l.Calls, l.Warmup
	cfg.CPUProfile, cfg.MemProfile = "", "" // the suite's profiles are the other runs'
	runtime.GC()
	r, err := MeasureShaped(ctx, ShapedConfig{Config: cfg, Pairs: cmp.Or(sc.ShapedPairs, DefaultPairs)}, progress)
	if err != nil {
		return ShapedResult{}, err
	}
	return r, nil
}

// median returns the run with the median throughput and the range of all.
func median(rs []Result) row {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Result) int { return cmp.Compare(a.CallsPerSec(), b.CallsPerSec()) })
	return row{Result: s[len(s)/2], minCPS: s[0].CallsPerSec(), maxCPS: s[len(s)-1].CallsPerSec()}
}
