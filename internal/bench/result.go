package bench

import (
	"fmt"
	"io"
	"time"
)

// Result is one measurement.
type Result struct {
	// System measured: toolwire-nats, toolwire-http or jetstream-baseline.
	System   string
	InFlight int
	// Calls measured (warm-up excluded), all successful.
	Calls int
	// Elapsed is the wall time of the measured calls.
	Elapsed        time.Duration
	P50, P99, P999 time.Duration
}

// CallsPerSec is the measured throughput.
func (r Result) CallsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Line is the machine-readable summary a single measurement ends with.
func (r Result) Line() string {
	return fmt.Sprintf("RESULT system=%s inflight=%d calls=%d calls_per_s=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f",
		r.System, r.InFlight, r.Calls, r.CallsPerSec(), ms(r.P50), ms(r.P99), ms(r.P999))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeTable prints results as a markdown table with each toolwire path's
// throughput relative to the baseline at the same number in flight.
func writeTable(w io.Writer, results []Result) {
	base := map[int]float64{}
	for _, r := range results {
		if r.System == "jetstream-baseline" {
			base[r.InFlight] = r.CallsPerSec()
		}
	}
	fmt.Fprintln(w, "| system | in flight | calls | calls/s | p50 ms | p99 ms | p99.9 ms | vs baseline |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		ratio := "—"
		if b := base[r.InFlight]; b > 0 && r.System != "jetstream-baseline" {
			ratio = fmt.Sprintf("%.0f%%", 100*r.CallsPerSec()/b)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %s |\n",
			r.System, r.InFlight, r.Calls, r.CallsPerSec(), ms(r.P50), ms(r.P99), ms(r.P999), ratio)
	}
}
