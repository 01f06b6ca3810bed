package capacity_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/capacity"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callsLimit is the calls stream's byte limit in these tests: small
// enough to fill in a few hundred publishes.
const callsLimit = 256 << 10

type bundle struct {
	env *bustest.Env
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{env: bustest.Start(t, bus.Config{Prefix: "cap", CallsMaxBytes: callsLimit})}
}

// publish writes n calls of 1 KiB to the calls stream and reports how
// many it took (a full discard-new stream refuses the rest).
func (b *bundle) publish(t *testing.T, n int) int {
	t.Helper()
	subject := b.env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "default", "", "fill")
	took := 0
	for range n {
		if _, err := b.env.Bus.JS.Publish(t.Context(), subject, bytes.Repeat([]byte("x"), 1024)); err != nil {
			require.True(t, bus.StoreFull(err), "only a full stream refuses: %v", err)
			continue
		}
		took++
	}
	return took
}

func (b *bundle) read(t *testing.T) capacity.Sample {
	t.Helper()
	s, err := capacity.Read(t.Context(), b.env.Bus.JS, b.env.Bus.Config)
	require.NoError(t, err)
	return s
}

func find(t *testing.T, status []capacity.Status, name string) capacity.Status {
	t.Helper()
	for _, s := range status {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no store %q in %v", name, status)
	return capacity.Status{}
}

// Filling the calls stream raises its use and brings its time to full
// closer, until it is full — at the dispatchers' high-water (90%), where
// new calls are refused; its bytes per call are its message size.
func TestFillingAStore(t *testing.T) {
	t.Parallel()
	b := setup(t)

	empty := b.read(t)
	calls := find(t, capacity.Compute(capacity.Sample{}, empty, 0), "calls")
	require.Equal(t, "CAP_CALLS", calls.Stream)
	require.EqualValues(t, callsLimit, calls.MaxBytes)
	require.True(t, calls.RefusesCalls)
	require.EqualValues(t, callsLimit*9/10, calls.FullBytes, "full at the high-water")
	require.Zero(t, calls.Used)
	require.False(t, calls.Measured, "one sample measures no rate")
	require.EqualValues(t, -1, calls.TimeToFull)
	require.EqualValues(t, -1, calls.ArchiveLag, "no archive")
	require.Len(t, empty.Stores, len(b.env.Bus.Config.Stores()), "every store of the layout, no account limit")

	// A quarter, with the samples ten seconds apart (their At is what the
	// rate is measured over: fixed, so the figures are exact).
	require.Equal(t, 64, b.publish(t, 64))
	quarter := b.read(t)
	quarter.At = empty.At.Add(10 * time.Second)
	first := find(t, capacity.Compute(empty, quarter, 0), "calls")
	require.True(t, first.Measured)
	require.Equal(t, 10*time.Second, first.Over)
	require.InDelta(t, 0.25, first.Used, 0.05)
	require.InDelta(t, float64(first.Bytes)/10, first.GrowthBytes, 1e-9)
	require.InDelta(t, float64(first.Bytes)/64, first.BytesPerCall, 1e-9, "one message per call")
	wantFull := time.Duration(float64(callsLimit*9/10-first.Bytes) / first.GrowthBytes * float64(time.Second))
	require.InDelta(t, wantFull, first.TimeToFull, float64(time.Millisecond))
	require.Greater(t, first.TimeToFull, 20*time.Second, "65% left to the high-water at a quarter per 10s")

	// Three quarters, at the same rate: use up, time to full down.
	require.Equal(t, 128, b.publish(t, 128))
	three := b.read(t)
	three.At = quarter.At.Add(20 * time.Second)
	second := find(t, capacity.Compute(quarter, three, 0), "calls")
	require.Greater(t, second.Used, first.Used)
	require.InDelta(t, 0.75, second.Used, 0.05)
	require.Less(t, second.TimeToFull, first.TimeToFull)

	// Past the high-water, with room for more: full, calls are refused.
	size := float64(first.Bytes) / 64
	more := int((0.92*callsLimit-float64(second.Bytes))/size) + 1
	require.Equal(t, more, b.publish(t, more))
	high := b.read(t)
	high.At = three.At.Add(5 * time.Second)
	past := find(t, capacity.Compute(three, high, 0), "calls")
	require.Greater(t, past.Used, 0.9)
	require.Less(t, past.Used, 0.95)
	require.Positive(t, past.GrowthBytes)
	require.Zero(t, past.TimeToFull, "full at the high-water")

	// Full: the stream refuses; full still, though it reads under 100%.
	require.Less(t, b.publish(t, 128), 128)
	full := b.read(t)
	full.At = high.At.Add(5 * time.Second)
	last := find(t, capacity.Compute(high, full, 0), "calls")
	require.Greater(t, last.Used, 0.99)
	require.Less(t, last.Used, 1.0)
	require.Zero(t, last.TimeToFull)

	// Nothing written: no growth, never full at this rate.
	still := b.read(t)
	still.At = full.At.Add(10 * time.Second)
	idle := find(t, capacity.Compute(full, still, 0), "results")
	require.True(t, idle.Measured)
	require.Zero(t, idle.GrowthBytes)
	require.EqualValues(t, -1, idle.TimeToFull)
	require.EqualValues(t, -1, idle.BytesPerCall, "no call in the window")
}

func TestReadWithoutInstallation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := capacity.Read(t.Context(), b.env.Bus.JS, bus.Config{Prefix: "other"})
	require.ErrorIs(t, err, bus.ErrNoInstallation)
	require.Contains(t, err.Error(), "OTHER_CALLS")
}

// The sampler keeps a rate over its window, and the dispatcher's metrics
// report it.
func TestSamplerMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := capacity.NewSampler(capacity.SamplerConfig{JetStream: b.env.Bus.JS, Bus: b.env.Bus.Config,
		Every: 20 * time.Millisecond, Window: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewDispatcherMetrics(reg)
	require.NoError(t, err)
	m.ObserveCapacity(s.Metrics)

	// Write until a sample sees the growth (each poll writes a little).
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.publish(t, 2)
		if status := s.Status(); status != nil { // nil until the first sample
			if c := find(t, status, "calls"); c.Measured && c.GrowthBytes > 0 && c.TimeToFull > 0 {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "no growth measured: %+v", s.Status())
		time.Sleep(10 * time.Millisecond) // pacing the writes, not synchronisation
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]bool{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "store" && l.GetValue() == "calls" {
					got[f.GetName()] = true
				}
			}
		}
	}
	for _, name := range []string{"toolwire_store_messages", "toolwire_store_used_ratio", "toolwire_store_growth_bytes_per_second",
		"toolwire_store_bytes_per_call", "toolwire_store_seconds_to_full"} {
		require.True(t, got[name], "%s{store=\"calls\"} in %s", name, strings.Join(keys(got), ", "))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSamplerConfig(t *testing.T) {
	t.Parallel()
	_, err := capacity.NewSampler(capacity.SamplerConfig{})
	require.ErrorContains(t, err, "JetStream is required")
}

// A store that filled and stopped growing is full, not "never full":
// JetStream stops it just under its limit (discard new refuses the
// message that would cross it; discard old trims to fit).
func TestFullStoreThatStoppedGrowing(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "cap", CallsMaxBytes: callsLimit, ResultsMaxBytes: callsLimit})
	b := &bundle{env: env}
	require.Less(t, b.publish(t, 400), 400, "the calls stream refuses")
	result := env.Bus.Subjects.Result("default", "d1", "c1")
	for range 400 {
		_, err := env.Bus.JS.Publish(t.Context(), result, bytes.Repeat([]byte("x"), 1024))
		require.NoError(t, err, "the results stream drops its oldest")
	}
	first := b.read(t)
	last := b.read(t)
	last.At = first.At.Add(10 * time.Minute)
	status := capacity.Compute(first, last, 0)
	for _, name := range []string{"calls", "results"} {
		s := find(t, status, name)
		require.True(t, s.Measured)
		require.Less(t, s.Used, 1.0, "%s: JetStream stops under the limit", name)
		require.Zero(t, s.GrowthBytes, name)
		require.Zero(t, s.TimeToFull, "%s is full: %+v", name, s)
	}
	full := gather(t, status)["toolwire_store_seconds_to_full"]
	require.Contains(t, full, "calls", "the metric stays while the store is full")
	require.Zero(t, full["calls"])
	require.Contains(t, full, "results")
	require.Zero(t, full["results"])
}

// gather is the dispatcher's capacity metrics for status: metric name →
// store → value.
func gather(t *testing.T, status []capacity.Status) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewDispatcherMetrics(reg)
	require.NoError(t, err)
	m.ObserveCapacity(func() []telemetry.StoreCapacity {
		var out []telemetry.StoreCapacity
		for _, s := range status {
			out = append(out, s.Metric())
		}
		return out
	})
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "store" {
					if got[f.GetName()] == nil {
						got[f.GetName()] = map[string]float64{}
					}
					got[f.GetName()][l.GetValue()] = metric.GetGauge().GetValue()
				}
			}
		}
	}
	return got
}

// A store kept by age never fills when what it takes in its age is less
// than its limit, however fast it grows now (events are kept 72h).
func TestTimeToFullWithinMaxAge(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "cap", EventsMaxBytes: callsLimit})
	b := &bundle{env: env}
	empty := b.read(t)
	event := env.Bus.Subjects.Event("default", "d1", "c1")
	for range 16 {
		_, err := env.Bus.JS.Publish(t.Context(), event, bytes.Repeat([]byte("x"), 1024))
		require.NoError(t, err)
	}
	now := b.read(t)

	// 16 KiB a day: 48 KiB in 72h, under the 256 KiB limit.
	now.At = empty.At.Add(24 * time.Hour)
	slow := find(t, capacity.Compute(empty, now, 0), "events")
	require.Equal(t, 72*time.Hour, slow.MaxAge)
	require.Positive(t, slow.GrowthBytes, "it grows now")
	require.EqualValues(t, -1, slow.TimeToFull, "never full: %+v", slow)

	// 16 KiB a minute: 72h of it is far above the limit.
	now.At = empty.At.Add(time.Minute)
	fast := find(t, capacity.Compute(empty, now, 0), "events")
	require.Positive(t, fast.TimeToFull)
	require.Less(t, fast.TimeToFull, time.Hour)
}

// A tiered account (limits per replica count, none at the top level)
// has its row: the limit of the installation's tier; its messages are not
// counted.
func TestTieredAccount(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir(), MaxStore: 64 << 30})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	require.NoError(t, srv.Server.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{
		"R1": {MaxMemory: -1, MaxStore: 32 << 30, MaxStreams: -1, MaxConsumers: -1}}))
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	bb, err := bus.Open(t.Context(), nc, bus.Config{Prefix: "cap", CallsMaxBytes: callsLimit}, bus.Options{})
	require.NoError(t, err)
	b := &bundle{env: &bustest.Env{Server: srv, Bus: bb}}
	require.Equal(t, 8, b.publish(t, 8))
	s := b.read(t)
	account := find(t, capacity.Compute(capacity.Sample{}, s, 0), capacity.AccountStore)
	require.Equal(t, "(account, tier R1)", account.Stream)
	require.EqualValues(t, 32<<30, account.MaxBytes)
	require.Positive(t, account.Bytes)
	require.Positive(t, account.Used)
	require.True(t, account.IsAccount())
	require.True(t, account.RefusesCalls)

	metrics := gather(t, capacity.Compute(capacity.Sample{}, s, 0))
	require.Contains(t, metrics["toolwire_store_used_ratio"], capacity.AccountStore)
	require.NotContains(t, metrics["toolwire_store_messages"], capacity.AccountStore, "not counted, not reported as 0")
	require.Contains(t, metrics["toolwire_store_messages"], "calls")
}
