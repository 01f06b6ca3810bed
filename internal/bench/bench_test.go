package bench

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testConfig(t testing.TB) Config {
	return Config{TempDir: t.TempDir(), MaxQueueWait: time.Minute,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

var resultLine = regexp.MustCompile(`^RESULT system=(toolwire-nats|toolwire-nats\+sessions|toolwire-http|toolwire-mcp|jetstream-raw|jetstream-fetch) inflight=8 calls=200 ` +
	`calls_per_s=[0-9.]+ p50_ms=[0-9.]+ p99_ms=[0-9.]+ p999_ms=[0-9.]+$`)

func TestEveryPathAnswersEveryCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, conn, http, system string
		sessions                       bool
	}{
		{"nats", PathNATS, "", "", "toolwire-nats", false},
		{"nats in sessions", PathNATS, "", "", "toolwire-nats+sessions", true},
		{"http h2c", PathHTTP, "", "h2c", "toolwire-http", false},
		{"http http1", PathHTTP, "", "http1", "toolwire-http", false},
		{"mcp", PathMCP, "", "", "toolwire-mcp", false},
		{"baseline", PathBaseline, "", "", "jetstream-raw", false},
		{"baseline over tcp", PathBaseline, "tcp", "", "jetstream-raw", false},
		{"baseline-fetch", PathBaselineFetch, "", "", "jetstream-fetch", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.Path, cfg.Conn, cfg.HTTP, cfg.Sessions = tc.path, tc.conn, tc.http, tc.sessions
			cfg.InFlight, cfg.Calls, cfg.Warmup = 8, 200, 16
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			r, err := Measure(ctx, cfg) // fails on the first call that does not answer ok
			require.NoError(t, err)
			require.Equal(t, tc.system, r.System)
			require.Equal(t, 200, r.Calls)
			require.Positive(t, r.P50)
			require.LessOrEqual(t, r.P50, r.P99)
			require.LessOrEqual(t, r.P99, r.P999)
			require.Regexp(t, resultLine, r.Line())
		})
	}
}

// Not parallel: the goroutine count is the process's, and the other
// tests' goroutines would be counted with the waiting callers.
func TestMeasureMemoryCountsWaitingCallers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m, err := MeasureMemory(ctx, testConfig(t), 300)
	require.NoError(t, err)
	require.Equal(t, 300, m.Calls)
	// Each waiting call is one caller goroutine parked in Dispatcher.Call;
	// the process's own background work (NATS, timers) makes the growth
	// approximate, never smaller.
	require.GreaterOrEqual(t, m.Goroutines, 300-10)
	require.LessOrEqual(t, m.Goroutines, 2*300)
	require.Contains(t, m.String(), "per 10k calls in flight")
}

func TestSuitePrintsTheTable(t *testing.T) {
	t.Parallel()
	// A bound on a hang, not a speed goal: seven systems on a loaded
	// 2-core machine took over 30 s (eight now).
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var out, progress strings.Builder
	err := RunSuite(ctx, SuiteConfig{Config: testConfig(t), Levels: []Level{{InFlight: 4, Calls: 50, Warmup: -1}},
		Rounds: 1, MemoryCalls: 200, Shaped: Level{InFlight: 4, Calls: 50, Warmup: -1}, ShapedPairs: 1}, &out, &progress)
	require.NoError(t, err)
	for _, system := range []string{"jetstream-raw", "jetstream-fetch", "toolwire-nats", "toolwire-nats+policy", "toolwire-nats+limits", "toolwire-nats+hook",
		"toolwire-nats+sessions", "toolwire-http", "toolwire-mcp"} {
		require.Contains(t, out.String(), "| "+system+" | 4 | 50 |")
		require.Contains(t, progress.String(), "RESULT system="+system+" inflight=4 calls=50 ")
	}
	// Each variant of the nats path is stated against the plain one.
	require.Contains(t, out.String(), "With the 50-rule policy at 4 in flight:")
	require.Contains(t, out.String(), "With a rate limit and a budget on every call at 4 in flight:")
	require.Contains(t, out.String(), "With one native before-hook on every call at 4 in flight:")
	require.Contains(t, out.String(), "With sessions, a mode and pins in force at 4 in flight:")
	require.Contains(t, out.String(), "MCP tools/call at 4 in flight:")
	require.Contains(t, out.String(), "With a profile, a toolset and a chain in force at 4 in flight:")
	require.Contains(t, out.String(), "| in flight | jetstream-raw | jetstream-fetch | toolwire-nats | toolwire-nats+policy |")
	require.Contains(t, out.String(), "Memory (median of 1): dispatcher heap per 10k calls in flight")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Path: PathNATS}.WithDefaults()
	require.NoError(t, ok.Validate())
	require.Equal(t, 2000, ok.Warmup, "warm-up defaults to a tenth of the calls")
	require.NoError(t, Config{Path: PathBaseline}.WithDefaults().Validate())
	require.NoError(t, Config{Path: PathBaselineFetch}.WithDefaults().Validate())
	require.ErrorContains(t, Config{Path: "jetstream-raw"}.WithDefaults().Validate(), "Path", "a system's name is not a path")
	for field, c := range map[string]Config{
		"Path":     {Path: "grpc"},
		"InFlight": {Path: PathNATS, InFlight: -1},
		"Calls":    {Path: PathNATS, Calls: -5},
		"Warmup":   {Path: PathNATS, Warmup: -2},
		"Conn":     {Path: PathNATS, Conn: "udp"},
		"HTTP":     {Path: PathHTTP, HTTP: "h3"},
	} {
		require.ErrorContains(t, c.WithDefaults().Validate(), field)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	require.Equal(t, 500*time.Millisecond, percentile(lat, 0.5))
	require.Equal(t, 990*time.Millisecond, percentile(lat, 0.99))
	require.Equal(t, 999*time.Millisecond, percentile(lat, 0.999))
	require.Equal(t, time.Millisecond, percentile(lat[:1], 0.999))
	require.Zero(t, percentile(nil, 0.5))
}

func TestTemplateSubstitutesEveryCallID(t *testing.T) {
	t.Parallel()
	const id = "01JABCDEFGHJKMNPQRSTVWXYZ0"
	tpl, err := newTemplate([]byte("\x0a\x1a"+id+"|meta:"+id), id)
	require.NoError(t, err)
	require.Equal(t, []int{2, 34}, tpl.offsets)
	other := strings.Repeat("7", idLen)
	require.Equal(t, "\x0a\x1a"+other+"|meta:"+other, string(tpl.with(other)))
	require.Equal(t, "\x0a\x1a"+id+"|meta:"+id, string(tpl.data), "the template itself is unchanged")
	_, err = newTemplate([]byte("nothing here"), id)
	require.Error(t, err)
}

func TestWriteTableRelatesToBaseline(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	writeTable(&b, []row{
		median([]Result{
			{System: "jetstream-raw", InFlight: 64, Calls: 1000, Elapsed: time.Second},
			{System: "jetstream-raw", InFlight: 64, Calls: 1000, Elapsed: 2 * time.Second},
			{System: "jetstream-raw", InFlight: 64, Calls: 1000, Elapsed: time.Second / 2},
		}),
		median([]Result{{System: "jetstream-fetch", InFlight: 64, Calls: 900, Elapsed: time.Second}}),
		median([]Result{{System: "toolwire-nats", InFlight: 64, Calls: 800, Elapsed: time.Second}}),
		{Result: Result{System: "toolwire-http", InFlight: 64}, failed: 3},
	})
	require.Contains(t, b.String(), "| vs jetstream-raw |")
	require.Contains(t, b.String(), "| jetstream-raw | 64 | 1000 | 1000 | 500–2000 |", "the median run, and the range of all")
	require.Contains(t, b.String(), "| jetstream-fetch | 64 | 900 | 900 | 900–900 | 0.00 | 0.00 | 0.00 | 90% |", "the old baseline against the new")
	require.Contains(t, b.String(), "| toolwire-nats | 64 | 800 | 800 | 800–800 | 0.00 | 0.00 | 0.00 | 80% |")
	require.Contains(t, b.String(), "| toolwire-http | 64 | every run failed |")
}

// Issue 33's layout: each system's calls/s against jetstream-raw's at the
// same number in flight, and the p50 against its at 1 in flight.
func TestWriteAgainstRawStatesEveryRatio(t *testing.T) {
	t.Parallel()
	res := func(system string, inflight, calls int, p50 time.Duration) row {
		return median([]Result{{System: system, InFlight: inflight, Calls: calls, Elapsed: time.Second, P50: p50}})
	}
	var b strings.Builder
	writeAgainstRaw(&b, []row{
		res("jetstream-raw", 1, 20000, 40*time.Microsecond),
		res("toolwire-nats", 1, 10000, 100*time.Microsecond),
		res("toolwire-http", 1, 5000, 200*time.Microsecond),
		res("jetstream-raw", 64, 40000, time.Millisecond),
		res("toolwire-nats", 64, 30000, 2*time.Millisecond),
		{Result: Result{System: "toolwire-http", InFlight: 64}, failed: 1},
	})
	require.Contains(t, b.String(), "| in flight | jetstream-raw | toolwire-nats | toolwire-http |\n|---|---|---|---|\n")
	require.Contains(t, b.String(),
		"| 1 | 20000/s, p50 0.040 ms | 10000/s (0.50×), p50 0.100 ms (2.50×) | 5000/s (0.25×), p50 0.200 ms (5.00×) |\n")
	require.Contains(t, b.String(), "| 64 | 40000/s | 30000/s (0.75×) | — |\n", "no p50 beyond 1 in flight; a failed system has no figure")
}

// BenchmarkEchoNATS measures echo calls through the dispatcher core, 64 in
// flight, on a fresh embedded server and in-process worker pool.
func BenchmarkEchoNATS(b *testing.B) {
	cfg := testConfig(b)
	cfg.Path, cfg.InFlight = PathNATS, 64
	cfg = cfg.WithDefaults()
	ctx := b.Context()
	e, err := startEnv(ctx, cfg)
	require.NoError(b, err)
	defer func() { require.NoError(b, e.close()) }()
	s, err := startStack(ctx, e, stackOptions{worker: cfg.workerConcurrency()})
	require.NoError(b, err)
	defer func() { require.NoError(b, s.stop()) }()
	_, _, err = drive(ctx, cfg.InFlight, 500, s.callNATS) // warm-up
	require.NoError(b, err)

	b.ResetTimer()
	meter := startCPU()
	lat, wall, err := drive(ctx, cfg.InFlight, b.N, s.callNATS)
	cpu := meter.since()
	b.StopTimer()
	require.NoError(b, err)
	r := summarise(cfg.system(), cfg.InFlight, lat, wall, cpu)
	b.ReportMetric(r.CallsPerSec(), "calls/s")
	b.ReportMetric(ms(r.P99), "p99-ms")
	b.ReportMetric(float64(r.CPUPerCall())/float64(time.Microsecond), "cpu-µs/call")
}

func TestCPUMeterSeesThisProcess(t *testing.T) {
	t.Parallel()
	m := startCPU()
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ { // burn CPU, not sleep
		_ = x * x
	}
	u := m.since()
	require.Positive(t, u.self)
	require.GreaterOrEqual(t, u.others, time.Duration(0))
}

// The overload mode answers every call it sends (ok, refused, or expired
// unstarted), refuses some during the overload, and reports it.
func TestOverloadModeAnswersEveryCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := MeasureOverload(ctx, OverloadConfig{Config: testConfig(t), For: 2 * time.Second, Recovery: time.Second, Baseline: time.Second}, testWriter{t})
	require.NoError(t, err)
	require.Positive(t, r.Capacity)
	for p, ps := range r.Phases[phaseBaseline:] {
		for o := range ps.Outcomes {
			require.Contains(t, []string{outcomeOK, outcomeOverloaded, outcomeExpired}, o, "phase %s", phaseNames[p+phaseBaseline])
		}
	}
	require.Positive(t, r.Phases[phaseOverload].Outcomes[outcomeOverloaded], "10x the capacity is refused in part")
	require.Positive(t, r.Phases[phaseOverload].Outcomes[outcomeOK])
	var out strings.Builder
	WriteOverload(&out, r)
	require.Contains(t, out.String(), "| overload | ")
}
