package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// benchCalls is the size of the benchmarks' index.
const benchCalls = 1_000_000

// benchBase is the time of the first synthetic call; calls are 86 ms
// apart (a day for a million).
var benchBase = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)

const benchStep = 86 * time.Millisecond

// benchFixture is one index of benchCalls synthetic calls, shared by the
// sub-benchmarks, and what filling it cost.
type benchFixture struct {
	x          *Index
	heapBytes  uint64
	fill       time.Duration
	errorTypes []string
}

var (
	fixtureOnce sync.Once
	fixture     *benchFixture
)

// benchIndex fills (once) an index with benchCalls calls of realistic
// cardinalities: 200 tools and 50 tenants (Zipf-distributed), 500 agents,
// 5,000 sessions, 20 workers, 2% failures of 5 error types, 0.2%
// cancelled, expired or dead-lettered, the newest 200 pending; arguments
// of about 75 bytes, short result texts, and a rare word ("needle-zq7")
// in one call of 100,000. It goes through add, the feeder's insert path.
func benchIndex(b *testing.B) *benchFixture {
	fixtureOnce.Do(func() {
		errorTypes := []string{"TIMEOUT", "TRANSIENT", "VALIDATION", "RATE_LIMIT", "INTERNAL"}
		rng := rand.New(rand.NewPCG(1, 2))
		tools := rand.NewZipf(rng, 1.1, 2, 199)
		tenants := rand.NewZipf(rng, 1.2, 1, 49)
		entropy := ulid.Monotonic(rand.NewChaCha8([32]byte{1}), 0)

		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		x := NewIndex(nil, nil, benchCalls, nil)
		for k := range benchCalls {
			at := benchBase.Add(time.Duration(k) * benchStep)
			tenant := fmt.Sprintf("tenant-%02d", tenants.Uint64())
			e := Entry{ID: ulid.MustNew(ulid.Timestamp(at), entropy).String(), Seq: uint64(k + 1), Time: at,
				Tenant: tenant, Agent: fmt.Sprintf("agent-%03d", rng.IntN(500)), Session: fmt.Sprintf("sess-%04d", rng.IntN(5000)),
				Tool: fmt.Sprintf("tool-%03d", tools.Uint64()), Outcome: audit.OutcomeOK,
				Duration: time.Duration(1+rng.IntN(2000)) * time.Millisecond, Worker: fmt.Sprintf("worker-%02d", rng.IntN(20))}
			args := fmt.Sprintf(`{"path":"/srv/data/%s/file-%d.json","query":"status = %d and owner = u%d"}`, tenant, k%100000, k%7, k%997)
			if k%100_000 == 50_000 {
				args = `{"path":"/srv/needle-zq7.json"}`
			}
			result := fmt.Sprintf("read %d rows", k%1000)
			switch r := rng.IntN(1000); {
			case k >= benchCalls-200:
				e.Outcome, e.Duration, e.Worker, result = audit.OutcomePending, 0, "", ""
			case r < 20:
				e.Outcome, e.ErrorType, result = audit.OutcomeError, errorTypes[r%len(errorTypes)], "upstream did not answer in time"
			case r == 20:
				e.Outcome, e.ErrorType, result = audit.OutcomeCancelled, "CANCELLED", "cancelled by the caller"
			case r == 21:
				e.Outcome, e.ErrorType, result = audit.OutcomeDeadLettered, "MAX_ATTEMPTS", "gave up after 3 attempts"
			}
			if !x.add(e, []byte(args), []byte(result), false) {
				b.Fatalf("call %d not added", k)
			}
		}
		fill := time.Since(start)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		fixture = &benchFixture{x: x, heapBytes: after.HeapAlloc - before.HeapAlloc, fill: fill, errorTypes: errorTypes}
	})
	if fixture == nil {
		b.Fatal("no fixture")
	}
	return fixture
}

// BenchmarkIndexQuery1M measures queries of the calls page over a million
// calls. Memory reports the heap the filled index takes (B/entry, MiB) and
// what one add cost while filling it; P95Mixed runs 200 mixed queries per
// iteration and reports their p50, p95 and maximum.
func BenchmarkIndexQuery1M(b *testing.B) {
	fx := benchIndex(b)
	x := fx.x
	mid := benchBase.Add(benchCalls / 2 * benchStep)
	cases := []struct {
		name string
		q    Query
		want int // matches on the page, at least
	}{
		{"NewestPage", Query{}, 50},
		{"ByTool", Query{Tool: "tool-042"}, 50},
		{"ByTenantOutcome", Query{Tenant: "tenant-07", Outcome: audit.OutcomeError}, 50},
		{"ByErrorType", Query{ErrorType: "timeout"}, 50},
		{"TextRare", Query{Text: "NEEDLE-zq7"}, 10},
		{"TextCommon", Query{Text: "status = 3 and"}, 50},
		{"TimeRange", Query{Since: mid, Until: mid.Add(time.Hour)}, 50},
		{"DeepPage", Query{Before: 100_000}, 50},
		{"DeepPageByTool", Query{Tool: "tool-003", Before: 200_000}, 50},
		{"MaxLimitByTenant", Query{Tenant: "tenant-01", Limit: MaxQueryLimit}, MaxQueryLimit},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var page []Entry
			for b.Loop() {
				page, _, _ = x.Query(c.q)
			}
			if len(page) < c.want {
				b.Fatalf("%d calls on the page, want %d", len(page), c.want)
			}
		})
	}
	b.Run("P95Mixed", func(b *testing.B) {
		qs := mixedQueries(fx, 200)
		var took []time.Duration
		for b.Loop() {
			for _, q := range qs {
				start := time.Now()
				x.Query(q)
				took = append(took, time.Since(start))
			}
		}
		reportLatencies(b, took)
	})
	b.Run("Memory", func(b *testing.B) {
		var s IndexStats
		for b.Loop() {
			s = x.Stats()
		}
		b.ReportMetric(float64(fx.heapBytes)/benchCalls, "B/entry")
		b.ReportMetric(float64(fx.heapBytes)/(1<<20), "MiB")
		b.ReportMetric(float64(s.Bytes)/benchCalls, "est-B/entry")
		b.ReportMetric(float64(fx.fill.Nanoseconds())/benchCalls, "fill-ns/call")
	})
}

// reportLatencies reports the p50, p95 and maximum of took, in ms.
func reportLatencies(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*95/100]), "p95-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
}

// mixedQueries are n queries as the calls page makes them: mostly recent
// pages with one or two filters, some searches, some deep pages.
func mixedQueries(fx *benchFixture, n int) []Query {
	rng := rand.New(rand.NewPCG(3, 4))
	qs := make([]Query, 0, n)
	for i := range n {
		var q Query
		switch i % 10 {
		case 0:
		case 1:
			q.Tool = fmt.Sprintf("tool-%03d", 2+rng.IntN(198))
		case 2:
			q.Tenant, q.Outcome = fmt.Sprintf("tenant-%02d", 1+rng.IntN(49)), audit.OutcomeError
		case 3:
			q.ErrorType = fx.errorTypes[rng.IntN(len(fx.errorTypes))]
		case 4:
			q.Text = fmt.Sprintf("file-%d.json", rng.IntN(100000))
		case 5:
			from := benchBase.Add(time.Duration(rng.IntN(benchCalls)) * benchStep)
			q.Since, q.Until = from, from.Add(time.Hour)
		case 6:
			q.Before = uint64(1 + rng.IntN(benchCalls))
		case 7:
			q.Session = fmt.Sprintf("sess-%04d", rng.IntN(5000))
		case 8:
			q.Tenant, q.Tool = fmt.Sprintf("tenant-%02d", 1+rng.IntN(49)), fmt.Sprintf("tool-%03d", 2+rng.IntN(20))
		case 9:
			q.Agent, q.Text = fmt.Sprintf("agent-%03d", rng.IntN(500)), "owner = u1"
		}
		qs = append(qs, q)
	}
	return qs
}

// rebuildCalls is how many calls BenchmarkIndexRebuild stores.
const rebuildCalls = 100_000

// BenchmarkIndexRebuild measures the rebuild: streams holding
// rebuildCalls calls (one in ten of a tool with a secret argument) and
// their results, stored as a dispatcher and a worker store them, are read
// into a new index each iteration; ns/op is one rebuild, up to Ready.
func BenchmarkIndexRebuild(b *testing.B) {
	env := bustest.Start(b, bus.Config{})
	ctx := context.Background()
	tools := indexTools(nil)
	var specs []*toolwirev1.ToolSpec
	for _, tl := range tools {
		if n := tl.Name(); n == "echo" || n == "signin" {
			specs = append(specs, tl.Spec())
		}
	}
	specs, err := registry.Publish(ctx, env.Bus.Registry, specs)
	if err != nil {
		b.Fatal(err)
	}
	js, subj := env.Bus.JS, env.Bus.Subjects
	publish := func(subject string, msg proto.Message, id string) {
		data, err := proto.Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		m := nats.NewMsg(subject)
		m.Data = data
		if id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		for {
			if _, err = js.PublishMsgAsync(m); err == nil {
				return
			}
			<-js.PublishAsyncComplete()
		}
	}
	start := time.Now()
	for k := range rebuildCalls {
		spec := specs[0]
		args := fmt.Sprintf(`{"text":"hello number %d from the rebuild benchmark"}`, k)
		text := fmt.Sprintf("hello number %d from the rebuild benchmark", k)
		if k%10 == 0 {
			spec = specs[1]
			args = fmt.Sprintf(`{"user":"user-%d","token":"tok-%d-secret"}`, k, k)
			text = fmt.Sprintf("signed in user-%d with [REDACTED]", k)
		}
		id := ulid.Make().String()
		tenant := fmt.Sprintf("tenant-%d", k%50)
		publish(subj.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, tenant, "builtin", spec.Name),
			&toolwirev1.ToolCall{CallId: id, Tool: spec.Name, SpecVersion: spec.Version, Arguments: []byte(args),
				Caller: &toolwirev1.Caller{Tenant: tenant, Agent: "bench", Session: fmt.Sprintf("s-%d", k%5000)}, Dispatcher: "d1"}, id)
		publish(subj.Result(tenant, "d1", id), &toolwirev1.ToolResponse{CallId: id, Tool: spec.Name, Ok: true,
			Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: text}}}},
			Meta:    &toolwirev1.ResponseMeta{Worker: "w1", Duration: durationpb.New(time.Millisecond)}}, "")
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	b.Logf("stored %d calls and results in %v", rebuildCalls, time.Since(start))
	var x *Index
	for b.Loop() {
		x = NewIndex(env.Bus, registry.NewStore(env.Bus.Registry, nil), 0, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- x.Run(ctx) }()
		select {
		case <-x.Ready():
		case err := <-done:
			b.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	st := x.Stats()
	if st.Entries != rebuildCalls {
		b.Fatalf("%d calls indexed, want %d", st.Entries, rebuildCalls)
	}
	if page, _, _ := x.Query(Query{Outcome: audit.OutcomePending}); len(page) > 0 {
		b.Fatalf("%d calls without their result", len(page))
	}
	b.ReportMetric(float64(rebuildCalls)/st.Rebuild.Seconds(), "calls/s")
	b.ReportMetric(float64(st.Bytes)/rebuildCalls, "est-B/entry")
}
