package faulttest_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/telemetry"
)

// streamSample is one look at a stream.
type streamSample struct {
	bytes, msgs uint64
	// oldest is the age of its first message.
	oldest time.Duration
}

// soakSample is one look at the stores and the test process's memory.
type soakSample struct {
	at      time.Time
	rss     int64
	streams map[string]streamSample
}

// sampler looks at the soak's stores and memory every second on the
// observer's connection until stop.
type sampler struct {
	t       *testing.T
	js      jetstream.JetStream
	streams []string
	done    chan struct{}
	quit    chan struct{}

	mu      sync.Mutex
	samples []soakSample
}

func startSampler(t *testing.T, js jetstream.JetStream, cfg bus.Config) *sampler {
	t.Helper()
	s := &sampler{t: t, js: js, done: make(chan struct{}), quit: make(chan struct{}),
		streams: []string{cfg.CallsStream(), cfg.ResultsStream(), cfg.EventsStream(), "KV_" + cfg.IdempotencyBucket()}}
	go s.run()
	t.Cleanup(s.stop)
	return s
}

func (s *sampler) run() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.sample()
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) sample() {
	ctx := s.t.Context()
	now := time.Now()
	one := soakSample{at: now, rss: rss(), streams: map[string]streamSample{}}
	for _, name := range s.streams {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			continue
		}
		state := st.CachedInfo().State
		var age time.Duration
		if state.Msgs > 0 {
			age = now.Sub(state.FirstTime)
		}
		one.streams[name] = streamSample{bytes: state.Bytes, msgs: state.Msgs, oldest: age}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, one)
}

// stop ends the sampling (idempotent).
func (s *sampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

func (s *sampler) all() []soakSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// rss is the test process's resident memory (VmRSS), in bytes; 0 where
// /proc does not say.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// soakRSSBound is the test process's memory the soak accepts: the
// dispatcher, the load and the harness, under the race detector (which
// multiplies memory by 5 to 10).
const soakRSSBound = 2 << 30

// checkSoakStorage: no refusal and no error was caused by storage (by the
// dispatcher's metrics and by what callers were told); every sampled
// stream stayed within its byte limit and, once two windows had passed,
// held at most two windows of messages, the last look at most a window
// and its hold; the test process's memory stayed bounded and did not
// grow with the calls made. It returns the figures.
func checkSoakStorage(t *testing.T, s soakSettings, smp *sampler, cfg bus.Config, reg *prometheus.Registry, load *soakLoad) string {
	t.Helper()
	for _, cause := range []string{telemetry.OverloadStore, telemetry.OverloadArchiveBehind} {
		require.Zero(t, refusalsBy(t, reg, cause), "calls refused OVERLOADED because of %s", cause)
	}
	load.mu.Lock()
	for k, n := range load.refused {
		require.NotContains(t, k, "STORAGE", "%d refusals caused by storage", n)
	}
	for k, n := range load.errs {
		require.NotContains(t, k, "STORAGE", "%d errors caused by storage", n)
	}
	load.mu.Unlock()

	limits := map[string]int64{cfg.CallsStream(): cfg.CallsMaxBytes, cfg.ResultsStream(): cfg.ResultsMaxBytes,
		cfg.EventsStream(): cfg.EventsMaxBytes, "KV_" + cfg.IdempotencyBucket(): cfg.IdempotencyMaxBytes}
	samples := smp.all()
	require.NotEmpty(t, samples)
	start := samples[0].at
	maxBytes, maxAge := map[string]uint64{}, map[string]time.Duration{}
	var maxRSS, thirdRSS int64
	for _, x := range samples {
		maxRSS = max(maxRSS, x.rss)
		if x.at.Sub(start) < s.load/3 {
			thirdRSS = max(thirdRSS, x.rss)
		}
		for name, st := range x.streams {
			maxBytes[name] = max(maxBytes[name], st.bytes)
			require.LessOrEqual(t, int64(st.bytes), limits[name], "%s over its limit at %s", name, x.at.Sub(start))
			if x.at.Sub(start) > 2*s.window && name != "KV_"+cfg.IdempotencyBucket() {
				maxAge[name] = max(maxAge[name], st.oldest)
				require.LessOrEqual(t, st.oldest, 2*s.window, "%s held %s of messages at %s", name, st.oldest, x.at.Sub(start))
			}
		}
	}
	last := samples[len(samples)-1]
	for _, name := range []string{cfg.CallsStream(), cfg.ResultsStream(), cfg.EventsStream()} {
		require.LessOrEqual(t, last.streams[name].oldest, s.window+s.hold+5*time.Second, "%s did not come back to its window", name)
	}
	require.Positive(t, maxRSS)
	require.Less(t, maxRSS, int64(soakRSSBound), "the test process's memory")
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		fmt.Fprintf(&b, "%s=%.1f/%.1fMiB(%.0f%%,oldest_max=%s,last=%s) ", strings.TrimPrefix(name, "TOOLWIRE_"), mib(maxBytes[name]), mib(uint64(limits[name])),
			100*float64(maxBytes[name])/float64(limits[name]), maxAge[name].Round(time.Second), last.streams[name].oldest.Round(time.Second))
	}
	fmt.Fprintf(&b, "rss_max=%.0fMiB rss_first_third=%.0fMiB rss_last=%.0fMiB samples=%d", mib(uint64(maxRSS)), mib(uint64(thirdRSS)), mib(uint64(last.rss)), len(samples))
	return b.String()
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// heapWatch takes the test process's Go heap in use, after a collection,
// at a third of the load and at its end: RSS counts memory the runtime
// has freed but not yet returned, and the load's own ledger (every
// accepted call's text and id) grows with the calls by design. With
// SOAK_PROFILE_DIR set it also writes a heap profile at each look
// (heap-third.pb.gz, heap-end.pb.gz), so that growth between them can be
// put to its package: go tool pprof -base heap-third.pb.gz heap-end.pb.gz.
type heapWatch struct {
	t           *testing.T
	quit, done  chan struct{}
	third, last uint64
}

func watchHeap(t *testing.T, third time.Duration) *heapWatch {
	h := &heapWatch{t: t, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		timer := time.NewTimer(third)
		defer timer.Stop()
		select {
		case <-timer.C:
			h.third = h.look("heap-third")
		case <-h.quit:
		}
	}()
	t.Cleanup(h.stopThird)
	return h
}

func (h *heapWatch) stopThird() {
	select {
	case <-h.quit:
	default:
		close(h.quit)
	}
	<-h.done
}

// end takes the last look (the load has stopped).
func (h *heapWatch) end() {
	h.stopThird()
	h.last = h.look("heap-end")
}

func (h *heapWatch) look(name string) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if dir := os.Getenv("SOAK_PROFILE_DIR"); dir != "" {
		if err := writeHeapProfile(filepath.Join(dir, name+".pb.gz")); err != nil {
			h.t.Errorf("heap profile: %v", err)
		}
	}
	return m.HeapInuse
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (h *heapWatch) String() string {
	return fmt.Sprintf("heap_inuse_first_third=%.0fMiB heap_inuse_end=%.0fMiB", mib(h.third), mib(h.last))
}

// refusalsBy sums toolwire_dispatcher_overload_refusals_total of cause.
func refusalsBy(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "toolwire_dispatcher_overload_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "cause" && l.GetValue() == cause }) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
