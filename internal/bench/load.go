package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// callFunc makes one call and reports whether it succeeded.
type callFunc func(ctx context.Context) error

// drive makes n calls of fn, inflight at a time, in a closed loop: each of
// inflight goroutines starts its next call when its previous one returns.
// It returns every call's latency (in no particular order) and the wall
// time of the whole run. The first failed call stops the run.
func drive(ctx context.Context, inflight, n int, fn callFunc) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(inflight, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := fn(ctx); err != nil {
					cancel(fmt.Errorf("call %d: %w", i, err))
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return nil, wall, err
	}
	return lat, wall, nil
}

// percentile returns the nearest-rank q-quantile (0 < q ≤ 1) of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// summarise turns latencies, wall and CPU time into a Result.
func summarise(system string, inflight int, lat []time.Duration, wall time.Duration, cpu cpuUse) Result {
	slices.Sort(lat)
	return Result{System: system, InFlight: inflight, Calls: len(lat), Elapsed: wall, CPU: cpu.self, OtherCPU: cpu.others,
		Allocs: cpu.allocs, AllocBytes: cpu.allocBytes,
		P50: percentile(lat, 0.50), P99: percentile(lat, 0.99), P999: percentile(lat, 0.999)}
}
