package dashboard

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/callindex/callindextest"
	"github.com/toolwire/toolwire/internal/identity"
)

// BenchmarkCallsPage1M measures the calls page as a browser gets it
// (filters parsed, the index queried, the page rendered) with a million
// calls indexed: each sub-benchmark one kind of request, and Mixed 200
// requests of every kind a round, reporting their p50, p95 and maximum.
//
//	go test -run '^$' -bench CallsPage1M -benchtime 20x ./internal/dashboard/
func BenchmarkCallsPage1M(b *testing.B) {
	fx := callindextest.Million(b)
	pages, err := parsePages()
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{index: fx.Index, pages: pages, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	admin := newViewer(identity.Identity{Tenant: "ops", Agent: "ui", Scopes: []string{"*"}}, "token", identity.VisibilityTenant)
	tenant := newViewer(identity.Identity{Tenant: "tenant-07", Agent: "ui"}, "token", identity.VisibilityTenant)
	mid := callindextest.Base.Add(callindextest.Calls / 2 * callindextest.Step).Format("2006-01-02T15:04")
	end := callindextest.Base.Add(callindextest.Calls/2*callindextest.Step + time.Hour).Format("2006-01-02T15:04")
	kinds := []struct {
		name, query string
		v           *viewer
	}{
		{"Newest", "", admin},
		{"Tool", "tool=tool-042", admin},
		{"TenantKey", "", tenant},
		{"TenantOutcome", "tenant=tenant-03&outcome=error", admin},
		{"ErrorType", "error_type=TIMEOUT", admin},
		{"Session", "session=sess-1234", admin},
		{"TimeRange", "since=" + mid + "&until=" + end, admin},
		{"TextRare", "q=needle-zq7", admin},
		{"TextCommon", "q=owner+%3D+u12", admin},
		{"Deep", "before=100000", admin},
	}
	get := func(b *testing.B, query string, v *viewer) {
		w := httptest.NewRecorder()
		s.callsPage(w, httptest.NewRequest(http.MethodGet, "/ui/calls?"+query, nil), v)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", query, w.Code, w.Body.String())
		}
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				get(b, k.query, k.v)
			}
		})
	}
	b.Run("Mixed", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			for i := range 200 {
				k := kinds[i%len(kinds)]
				start := time.Now()
				get(b, k.query, k.v)
				took = append(took, time.Since(start))
			}
		}
		callindextest.ReportLatencies(b, took)
	})
}
