package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"
)

// Level is one number of calls in flight of the suite, with how many calls
// it measures.
type Level struct {
	InFlight, Calls, Warmup int
}

// DefaultLevels keep the whole suite around two and a half minutes on a
// 2-core machine.
var DefaultLevels = []Level{
	{InFlight: 1, Calls: 3000, Warmup: 300},
	{InFlight: 64, Calls: 30000, Warmup: 3000},
	{InFlight: 1024, Calls: 30000, Warmup: 5000},
}

// MemoryCalls is how many calls the suite holds in flight to measure the
// dispatcher's memory.
const MemoryCalls = 10000

// RunSuite measures the baseline and both toolwire paths at every level,
// then the dispatcher's memory, and writes a markdown report to out.
// Progress and each measurement's RESULT line go to progress.
func RunSuite(ctx context.Context, cfg Config, levels []Level, out, progress io.Writer) error {
	cfg.Path = PathBaseline
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	start := time.Now()
	p, err := capturePayloads(ctx, cfg)
	if err != nil {
		return err
	}
	var results []Result
	for _, l := range levels {
		for _, path := range []string{PathBaseline, PathNATS, PathHTTP} {
			c := cfg
			c.Path, c.InFlight, c.Calls, c.Warmup = path, l.InFlight, l.Calls, l.Warmup
			r, err := measure(ctx, c, p)
			if err != nil {
				return err
			}
			fmt.Fprintln(progress, r.Line())
			results = append(results, r)
		}
	}
	mem, err := MeasureMemory(ctx, cfg, MemoryCalls)
	if err != nil {
		return err
	}
	fmt.Fprintln(progress, "MEMORY", mem)

	fmt.Fprintf(out, "toolwire-bench: %s, GOMAXPROCS=%d, NATS connections %s, HTTP %s, suite took %s\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), cfg.Conn, cfg.HTTP, time.Since(start).Round(time.Second))
	writeTable(out, results)
	fmt.Fprintf(out, "\n%s\n", mem)
	return nil
}
