package callindextest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
)

// Calls is the size of the fixture's index.
const Calls = 1_000_000

// Base is the time of the first synthetic call; calls are Step (86 ms)
// apart (a day for a million).
var Base = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)

// Step is the time between two synthetic calls.
const Step = 86 * time.Millisecond

// Fixture is one index of Calls synthetic calls, shared by the
// benchmarks, and what filling it cost.
type Fixture struct {
	Index *callindex.Index
	// HeapBytes is the heap the filled index takes; Fill how long
	// filling it took.
	HeapBytes uint64
	Fill      time.Duration
	// ErrorTypes are the error types of the failed calls.
	ErrorTypes []string
}

var (
	fixtureOnce sync.Once
	fixture     *Fixture
)

// Million fills (once) an index with Calls calls of realistic
// cardinalities: 200 tools and 50 tenants (Zipf-distributed), 500 agents,
// 5,000 sessions, 20 workers, 2% failures of 5 error types, 0.2%
// cancelled, expired or dead-lettered, the newest 200 pending; arguments
// of about 75 bytes, short result texts, and a rare word ("needle-zq7")
// in one call of 100,000. It goes through Index.Add, the feed's insert
// path.
func Million(tb testing.TB) *Fixture {
	fixtureOnce.Do(func() { fixture = fill(tb) })
	if fixture == nil {
		tb.Fatal("no fixture")
	}
	return fixture
}

func fill(tb testing.TB) *Fixture {
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
	x, err := callindex.New(callindex.Config{Max: Calls})
	if err != nil {
		tb.Fatal(err)
	}
	for k := range Calls {
		at := Base.Add(time.Duration(k) * Step)
		tenant := fmt.Sprintf("tenant-%02d", tenants.Uint64())
		e := callindex.Entry{ID: ulid.MustNew(ulid.Timestamp(at), entropy).String(), Seq: uint64(k + 1), Time: at,
			Tenant: tenant, Agent: fmt.Sprintf("agent-%03d", rng.IntN(500)), Session: fmt.Sprintf("sess-%04d", rng.IntN(5000)),
			Tool: fmt.Sprintf("tool-%03d", tools.Uint64()), Outcome: audit.OutcomeOK,
			Duration: time.Duration(1+rng.IntN(2000)) * time.Millisecond, Worker: fmt.Sprintf("worker-%02d", rng.IntN(20))}
		args := fmt.Sprintf(`{"path":"/srv/data/%s/file-%d.json","query":"status = %d and owner = u%d"}`, tenant, k%100000, k%7, k%997)
		if k%100_000 == 50_000 {
			args = `{"path":"/srv/needle-zq7.json"}`
		}
		result := fmt.Sprintf("read %d rows", k%1000)
		switch r := rng.IntN(1000); {
		case k >= Calls-200:
			e.Outcome, e.Duration, e.Worker, result = audit.OutcomePending, 0, "", ""
		case r < 20:
			e.Outcome, e.ErrorType, result = audit.OutcomeError, errorTypes[r%len(errorTypes)], "upstream did not answer in time"
		case r == 20:
			e.Outcome, e.ErrorType, result = audit.OutcomeCancelled, "CANCELLED", "cancelled by the caller"
		case r == 21:
			e.Outcome, e.ErrorType, result = audit.OutcomeDeadLettered, "MAX_ATTEMPTS", "gave up after 3 attempts"
		}
		if !x.Add(e, []byte(args), []byte(result)) {
			tb.Fatalf("call %d not added", k)
		}
	}
	took := time.Since(start)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return &Fixture{Index: x, HeapBytes: after.HeapAlloc - before.HeapAlloc, Fill: took, ErrorTypes: errorTypes}
}

// ReportLatencies reports the p50, p95 and maximum of took, in ms.
func ReportLatencies(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*95/100]), "p95-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
}
