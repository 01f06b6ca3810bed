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
	// CPU is the process's CPU time (user and system) during the measured
	// calls: client, server, dispatcher and worker together, since all run
	// in this process. Less sensitive than throughput to other load on the
	// machine.
	CPU time.Duration
	// Redelivered is how many calls the pool consumer redelivered: calls a
	// worker lost until AckWait. Anything but 0 is a defect.
	Redelivered int
	// OtherCPU is the CPU time the rest of the machine used meanwhile:
	// other load that disturbed the measurement. 0 where unknown.
	OtherCPU time.Duration
	// Allocs and AllocBytes are the heap allocations of the process during
	// the measured calls (all parts together, as CPU).
	Allocs, AllocBytes uint64
}

// AllocsPerCall is the heap allocations per measured call, and their bytes.
func (r Result) AllocsPerCall() (objects, bytes float64) {
	if r.Calls == 0 {
		return 0, 0
	}
	return float64(r.Allocs) / float64(r.Calls), float64(r.AllocBytes) / float64(r.Calls)
}

// OtherCores is the average number of cores the rest of the machine kept
// busy during the measured calls.
func (r Result) OtherCores() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return r.OtherCPU.Seconds() / r.Elapsed.Seconds()
}

// CPUPerCall is the process's CPU time per measured call.
func (r Result) CPUPerCall() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Calls)
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

// writeTable prints rows as a markdown table with each toolwire path's
// throughput relative to the baseline at the same number in flight.
func writeTable(w io.Writer, rows []row) {
	base := map[int]float64{}
	for _, r := range rows {
		if r.System == "jetstream-baseline" {
			base[r.InFlight] = r.CallsPerSec()
		}
	}
	fmt.Fprintln(w, "| system | in flight | calls/run | calls/s | calls/s range | p50 ms | p99 ms | p99.9 ms | vs baseline | CPU µs/call | other load (cores) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.Calls == 0 {
			fmt.Fprintf(w, "| %s | %d | every run failed | | | | | | | | |\n", r.System, r.InFlight)
			continue
		}
		system := r.System
		if r.failed > 0 {
			system += fmt.Sprintf(" (%d run(s) failed)", r.failed)
		}
		ratio := "—"
		if b := base[r.InFlight]; b > 0 && r.System != "jetstream-baseline" {
			ratio = fmt.Sprintf("%.0f%%", 100*r.CallsPerSec()/b)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.0f–%.0f | %.2f | %.2f | %.2f | %s | %.0f | %.2f |\n",
			system, r.InFlight, r.Calls, r.CallsPerSec(), r.minCPS, r.maxCPS, ms(r.P50), ms(r.P99), ms(r.P999), ratio,
			float64(r.CPUPerCall())/float64(time.Microsecond), r.OtherCores())
	}
}

// writePolicyCost states, per level, the calls/s of the nats path with the
// 50-rule policy in force as a share of the same path without a policy in
// the same suite (the goal: at least 90% at 64 in flight).
func writePolicyCost(w io.Writer, rows []row) {
	plain := map[int]float64{}
	plainRow := map[int]row{}
	connect := map[int]row{}
	for _, r := range rows {
		switch r.System {
		case (Config{Path: PathNATS}).system():
			plain[r.InFlight] = r.CallsPerSec()
			plainRow[r.InFlight] = r
		case (Config{Path: PathHTTP}).system():
			connect[r.InFlight] = r
		}
	}
	for _, r := range rows {
		if c := connect[r.InFlight]; r.System == (Config{Path: PathMCP}).system() && r.Calls > 0 && c.Calls > 0 {
			fmt.Fprintf(w, "\nMCP tools/call at %d in flight: %.0f calls/s (p50 %.2f ms, p99 %.2f ms), %.2f× the Connect Call's %.0f calls/s (p50 %.2f ms, p99 %.2f ms).\n",
				r.InFlight, r.CallsPerSec(), float64(r.P50)/1e6, float64(r.P99)/1e6, r.CallsPerSec()/c.CallsPerSec(),
				c.CallsPerSec(), float64(c.P50)/1e6, float64(c.P99)/1e6)
		}
	}
	for _, r := range rows {
		if r.Calls == 0 || plain[r.InFlight] == 0 {
			continue
		}
		switch r.System {
		case (Config{Path: PathNATS, Policy: true}).system():
			fmt.Fprintf(w, "\nWith the 50-rule policy at %d in flight: %.0f calls/s, %.2f× the calls/s without a policy.\n",
				r.InFlight, r.CallsPerSec(), r.CallsPerSec()/plain[r.InFlight])
		case (Config{Path: PathNATS, Limits: true}).system():
			fmt.Fprintf(w, "\nWith a rate limit and a budget on every call at %d in flight: %.0f calls/s, %.2f× the calls/s without a policy.\n",
				r.InFlight, r.CallsPerSec(), r.CallsPerSec()/plain[r.InFlight])
		case (Config{Path: PathNATS, Hook: true}).system():
			p := plainRow[r.InFlight]
			fmt.Fprintf(w, "\nWith one native before-hook on every call at %d in flight: %.0f calls/s, %.2f× the calls/s without a policy; p50 +%.2f ms; +%.0f µs of CPU per call.\n",
				r.InFlight, r.CallsPerSec(), r.CallsPerSec()/plain[r.InFlight],
				float64(r.P50-p.P50)/1e6, float64(r.CPUPerCall()-p.CPUPerCall())/1e3)
		case (Config{Path: PathNATS, Sessions: true}).system():
			fmt.Fprintf(w, "\nWith sessions, a mode and pins in force at %d in flight: %.0f calls/s, %.2f× the calls/s without sessions.\n",
				r.InFlight, r.CallsPerSec(), r.CallsPerSec()/plain[r.InFlight])
		}
	}
}
