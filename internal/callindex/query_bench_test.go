package callindex_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/callindex/callindextest"
)

// BenchmarkIndexQuery1M measures queries of the calls page over a million
// calls. Memory reports the heap the filled index takes (B/entry, MiB) and
// what one add cost while filling it; P95Mixed runs 200 mixed queries per
// iteration and reports their p50, p95 and maximum.
func BenchmarkIndexQuery1M(b *testing.B) {
	fx := callindextest.Million(b)
	x := fx.Index
	mid := callindextest.Base.Add(callindextest.Calls / 2 * callindextest.Step)
	cases := []struct {
		name string
		q    callindex.Query
		want int // matches on the page, at least
	}{
		{"NewestPage", callindex.Query{}, 50},
		{"ByTool", callindex.Query{Tool: "tool-042"}, 50},
		{"ByTenantOutcome", callindex.Query{Tenant: "tenant-07", Outcome: audit.OutcomeError}, 50},
		{"ByErrorType", callindex.Query{ErrorType: "timeout"}, 50},
		{"TextRare", callindex.Query{Text: "NEEDLE-zq7"}, 10},
		{"TextCommon", callindex.Query{Text: "status = 3 and"}, 50},
		{"TimeRange", callindex.Query{Since: mid, Until: mid.Add(time.Hour)}, 50},
		{"DeepPage", callindex.Query{Before: 100_000}, 50},
		{"DeepPageByTool", callindex.Query{Tool: "tool-003", Before: 200_000}, 50},
		{"MaxLimitByTenant", callindex.Query{Tenant: "tenant-01", Limit: callindex.MaxQueryLimit}, callindex.MaxQueryLimit},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var page []callindex.Entry
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
		callindextest.ReportLatencies(b, took)
	})
	b.Run("Memory", func(b *testing.B) {
		var s callindex.Stats
		for b.Loop() {
			s = x.Stats()
		}
		b.ReportMetric(float64(fx.HeapBytes)/callindextest.Calls, "B/entry")
		b.ReportMetric(float64(fx.HeapBytes)/(1<<20), "MiB")
		b.ReportMetric(float64(s.Bytes)/callindextest.Calls, "est-B/entry")
		b.ReportMetric(float64(fx.Fill.Nanoseconds())/callindextest.Calls, "fill-ns/call")
	})
}

// mixedQueries are n queries as the calls page makes them: mostly recent
// pages with one or two filters, some searches, some deep pages.
func mixedQueries(fx *callindextest.Fixture, n int) []callindex.Query {
	rng := rand.New(rand.NewPCG(3, 4))
	qs := make([]callindex.Query, 0, n)
	for i := range n {
		var q callindex.Query
		switch i % 10 {
		case 0:
		case 1:
			q.Tool = fmt.Sprintf("tool-%03d", 2+rng.IntN(198))
		case 2:
			q.Tenant, q.Outcome = fmt.Sprintf("tenant-%02d", 1+rng.IntN(49)), audit.OutcomeError
		case 3:
			q.ErrorType = fx.ErrorTypes[rng.IntN(len(fx.ErrorTypes))]
		case 4:
			q.Text = fmt.Sprintf("file-%d.json", rng.IntN(100000))
		case 5:
			from := callindextest.Base.Add(time.Duration(rng.IntN(callindextest.Calls)) * callindextest.Step)
			q.Since, q.Until = from, from.Add(time.Hour)
		case 6:
			q.Before = uint64(1 + rng.IntN(callindextest.Calls))
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
