package faulttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// soakSettings are a soak's, scaled down from production's: a window of
// seconds instead of days, segments of seconds instead of an hour, byte
// limits sized by the window with the rule of docs/reliability.md.
type soakSettings struct {
	// load is how long calls are made (SOAK_DURATION; default 90s, what
	// make test affords: three windows; make soak runs 10m).
	load time.Duration
	// rate is the calls a second (SOAK_RATE; default 80).
	rate int
	// window is the live streams' retention window; segment, settle and
	// every the archiver's; hold its HoldAhead (a quarter of the window,
	// archive.Config's default); outage the archive outage the byte
	// limits ride out.
	window, segment, settle, every, hold, outage time.Duration
}

func soakFromEnv(t *testing.T) soakSettings {
	t.Helper()
	s := soakSettings{load: 90 * time.Second, rate: 80, window: 30 * time.Second, segment: 5 * time.Second,
		settle: time.Second, every: time.Second, outage: 30 * time.Second}
	s.hold = s.window / 4
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SOAK_DURATION")
		s.load = d
	}
	if v := os.Getenv("SOAK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SOAK_RATE")
		s.rate = n
	}
	return s
}

// Bytes a call costs each store, generously (measured 377 B of calls, 374
// B of results, 156 B × 1.5 of events and 313 B of idempotency key in the
// 30-minute soak of issue 29, with smaller arguments).
const (
	soakCallBytes   = 1 << 10
	soakResultBytes = 1 << 10
	soakEventBytes  = 2 << 10
	soakKeyBytes    = 1 << 10
	// one call in soakKeyedEvery carries an idempotency key.
	soakKeyedEvery = 4
)

// limit is the byte limit of a store that stores perCall bytes for a
// share of the calls, by the rule of docs/reliability.md ("The record
// lasts"): peak bytes stored per second × (window + HoldAhead + the
// longest archive outage to ride out), the peak taken as twice the rate.
func (s soakSettings) limit(perCall int64, share int) int64 {
	span := s.window + s.hold + s.outage
	return max(1<<20, 2*int64(s.rate)*perCall*int64(span/time.Second)/int64(share))
}

func (s soakSettings) bus() bus.Config {
	return bus.Config{RetentionWindow: s.window, DuplicateWindow: s.window / 3,
		CallsMaxBytes: s.limit(soakCallBytes, 1), ResultsMaxBytes: s.limit(soakResultBytes, 1),
		EventsMaxBytes: s.limit(soakEventBytes, 1), IdempotencyMaxBytes: s.limit(soakKeyBytes, soakKeyedEvery)}
}

// TestSoakRetentionWithArchive is issue 29's compressed-time soak: a
// steady load of calls (a quarter with idempotency keys, some of those
// repeated) for SOAK_DURATION with a retention window of 30 s, the
// archive sealing 5 s segments into a directory, stores sized by the
// window, workers killed with SIGKILL and the dispatcher killed (its
// connection closed without a drain) and restarted on the same store, so
// that several windows pass and the archive holds most of the record.
// At the end: no refusal or error caused by storage; the ledger (every
// accepted call exactly one terminal result, the tool that is not
// idempotent run at most once); an audit with --verify over archive and
// live equal to every accepted call with its one result, without an
// anomaly; every archive chain verified; the live streams within their
// limits and back to the window; the test process's memory bounded.
func TestSoakRetentionWithArchive(t *testing.T) {
	// In parallel with TestClusterLeaderKills and the single-node
	// scenarios under make test (its memory bound leaves room for them);
	// make soak runs it alone, for its figures.
	t.Parallel()
	s := soakFromEnv(t)
	ctx := t.Context()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700)) // the archive holds secrets: the archiver warns otherwise
	store, err := archive.OpenBucket(ctx, dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	reg := prometheus.NewRegistry()
	metrics, err := telemetry.NewDispatcherMetrics(reg)
	require.NoError(t, err)
	logs := &countingHandler{counts: map[string]int{}}
	c := faulttest.NewClusterWith(t, faulttest.ClusterOptions{Bus: s.bus(), Logger: slog.New(logs), Dispatcher: dispatch.Config{
		Archive: store, ArchiveSegment: s.segment, ArchiveSettle: s.settle, ArchiveEvery: s.every,
		PublishHorizon: s.window / 6, Metrics: metrics}})
	workers := make([]*faulttest.Proc, 2)
	opts := make([]faulttest.WorkerOptions, len(workers))
	for i := range workers {
		opts[i] = faulttest.WorkerOptions{Name: fmt.Sprintf("w%d", i), Concurrency: 16, AckWait: 2 * time.Second}
		workers[i] = c.StartWorker(opts[i])
	}
	obs := observer(t, c.URL)
	smp := startSampler(t, obs, c.Bus.Config)
	load := &soakLoad{c: c, s: s, accepted: map[string]string{}, errored: map[string]string{}, tools: map[string]string{},
		refused: map[string]int{}, errs: map[string]int{}, unconfirmed: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() { // what the dispatchers logged and the callers got, for the failure's cause
			load.mu.Lock()
			defer load.mu.Unlock()
			t.Logf("soak failed: dispatcher_logs=%v errors=%v refused=%v", logs.summary(), load.errs, load.refused)
		}
	})

	start := time.Now()
	heap := watchHeap(t, s.load/3)
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); load.run(ctx, stop) }()
	faults := runFaults(t, c, workers, opts, s.load)
	close(stop)
	<-loadDone
	smp.stop()
	heap.end()
	loadTime := time.Since(start)

	phase := func(what string) { t.Logf("soak: %s at %s", what, time.Since(start).Round(100*time.Millisecond)) }
	phase("load stopped")
	waitDrained(t, obs, c.Bus.Config)
	phase("pool drained")
	// The audit with Verify reads every result and event of each call
	// across archive and live (a second result is an anomaly) over the
	// whole record, and verifies the archive's chains; the result
	// messages of every call are counted over archive and live below.
	verified := auditUntilSettled(t, obs, store, audit.Filter{}, audit.Options{Verify: true})
	phase("audited with verify")
	checkVerified(t, verified)
	recs, sum := verified.recs, verified.sum
	checkSoakLedger(t, c, load, recs)
	results, live := countResults(t, obs, store, c.Bus.Config.ResultsStream())
	phase("results counted")
	segments := verifySoakArchive(t, store, c.Bus.Config)
	phase("archive verified")
	archivedReads := checkArchivedReads(t, c, load, recs, live)
	phase("archived results read")
	storage := checkSoakStorage(t, s, smp, c.Bus.Config, reg, load)

	load.mu.Lock()
	defer load.mu.Unlock()
	dupes, none := 0, 0
	for _, id := range load.accepted {
		switch results[id] {
		case 0:
			none++
		case 1:
		default:
			dupes++
		}
	}
	require.Zero(t, none, "accepted calls without a result message over archive and live")
	require.Zero(t, dupes, "accepted calls with more than one result message over archive and live")
	figure(t, "load=%s rate=%d/s window=%s segment=%s submitted=%d accepted=%d audited=%d outcomes=%v stored_after_error=%d "+
		"refused=%v errors=%v shed=%d repeats=%d worker_kills=%d dispatcher_kills=%d dispatcher_gap_max=%s "+
		"archive_segments=%v archived_reads=%d %s %s dispatcher_logs=%v total=%s",
		loadTime.Round(time.Second), s.rate, s.window, s.segment, load.submitted, len(load.accepted), sum.Records, sum.Outcomes,
		load.storedAfterError, load.refused, load.errs, load.shed, load.repeats, faults.workerKills, faults.dispatcherKills,
		faults.dispatcherGapMax.Round(time.Millisecond), segments, archivedReads, storage, heap, logs.summary(), time.Since(start).Round(time.Second))
}

// soakLoad makes the soak's calls: an open load of rate calls a second
// (a new caller every tick whether or not the earlier ones were
// answered, at most soakCallers at once: beyond, a tick is shed and
// counted), through whichever dispatcher runs.
type soakLoad struct {
	c *faulttest.Cluster
	s soakSettings

	mu        sync.Mutex
	submitted int
	// accepted maps each accepted call's text (its unique argument) to
	// its id; errored the text of each call whose caller got an error
	// (it may be stored: the outcome is unknown to the caller), with the
	// error; tools the tool of each text.
	accepted, errored, tools map[string]string
	// refused counts refusals by error type and cause; errs errors by
	// class.
	refused, errs map[string]int
	// unconfirmed holds the ids of calls answered accepted and
	// unconfirmed (a failure names them: such a call's record depends on
	// the dispatcher that admitted it living until it is stored).
	unconfirmed map[string]bool
	// storedAfterError counts audited calls whose caller got an error.
	storedAfterError int
	shed, repeats    int
	// keyed are accepted keyed calls that a later caller repeats.
	keyed []keyedCall
}

type keyedCall struct {
	req *toolwirev1.CallRequest
	id  string
	at  time.Time
}

const soakCallers = 512

func (l *soakLoad) run(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / time.Duration(l.s.rate))
	defer tick.Stop()
	sem := make(chan struct{}, soakCallers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			l.mu.Lock()
			l.shed++
			l.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l.call(ctx, n)
			if n%40 == 20 {
				l.repeat(ctx)
			}
		}()
	}
}

// call makes call n: the tool that is not idempotent for a quarter,
// an idempotency key on another quarter.
func (l *soakLoad) call(ctx context.Context, n int) {
	text := "s" + strconv.Itoa(n)
	tool := "ledger_idem"
	if n%4 == 3 {
		tool = "ledger"
	}
	req := &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: fmt.Sprintf(`{"sleep_ms":5,"text":%q}`, text)}
	if n%soakKeyedEvery == 0 {
		req.IdempotencyKey = "key-" + text
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sub, err := l.c.Current().Submit(sctx, identity.Default, req)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.submitted++
	l.tools[text] = tool
	switch {
	case err != nil:
		l.errored[text] = err.Error()
		l.errs[errorClass(err.Error())]++
	case sub.Rejected != nil:
		l.refused[refusalClass(sub.Rejected)]++
	default:
		l.accepted[text] = sub.CallID
		if sub.Unconfirmed {
			l.errs["accepted unconfirmed (not an error)"]++
			l.unconfirmed[sub.CallID] = true
		}
		if req.IdempotencyKey != "" {
			l.keyed = append(l.keyed, keyedCall{req: req, id: sub.CallID, at: time.Now()})
		}
	}
}

// repeat submits again an accepted keyed call made 2 s to a third of a
// window ago, as a client retrying: it must name the same call.
func (l *soakLoad) repeat(ctx context.Context) {
	l.mu.Lock()
	now := time.Now()
	l.keyed = slices.DeleteFunc(l.keyed, func(k keyedCall) bool { return now.Sub(k.at) > l.s.window/3 })
	i := slices.IndexFunc(l.keyed, func(k keyedCall) bool { return now.Sub(k.at) >= 2*time.Second })
	if i < 0 {
		l.mu.Unlock()
		return
	}
	k := l.keyed[i]
	l.keyed = slices.Delete(l.keyed, i, i+1)
	l.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sub, err := l.c.Current().Submit(sctx, identity.Default, k.req)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.errs["repeat: "+errorClass(err.Error())]++
	case sub.Rejected != nil:
		l.refused["repeat: "+refusalClass(sub.Rejected)]++
	case sub.CallID != k.id:
		l.errs[fmt.Sprintf("repeat of key %s named %s, not %s", k.req.IdempotencyKey, sub.CallID, k.id)]++
	default:
		l.repeats++
	}
}

// storageWords mark a message whose cause is storage.
var storageWords = []string{"maximum bytes", "maximum messages", "insufficient resources", "insufficient storage", "no space",
	"nearly full", "is full", "store", "storage", "archive"}

func storageCaused(msg string) bool {
	msg = strings.ToLower(msg)
	return slices.ContainsFunc(storageWords, func(w string) bool { return strings.Contains(msg, w) })
}

// errorClass names an admission error's kind for the counts: storage
// (must never happen), the dispatcher killed under the call, or the
// message itself.
func errorClass(msg string) string {
	switch {
	case storageCaused(msg):
		return "STORAGE: " + msg
	case strings.Contains(msg, "connection closed"), strings.Contains(msg, "stopped"), strings.Contains(msg, "draining"):
		return "dispatcher killed"
	case strings.Contains(msg, "deadline exceeded"), strings.Contains(msg, "timeout"):
		return "timeout"
	}
	return msg
}

func refusalClass(r *toolwirev1.ToolResponse) string {
	msg := r.GetError().GetMessage()
	if storageCaused(msg) {
		return "STORAGE " + r.GetError().GetType().String() + ": " + msg
	}
	return r.GetError().GetType().String() + ": " + msg
}

// soakFaults is what runFaults did.
type soakFaults struct {
	workerKills, dispatcherKills int
	dispatcherGapMax             time.Duration
}

// runFaults kills a worker (SIGKILL, then a new one) every eighth of the
// load, the two in turn, and the dispatcher every third, until load has
// passed.
func runFaults(t *testing.T, c *faulttest.Cluster, workers []*faulttest.Proc, opts []faulttest.WorkerOptions, load time.Duration) soakFaults {
	t.Helper()
	var f soakFaults
	start := time.Now()
	nextWorker, nextDispatcher := start.Add(load/8), start.Add(load/3)
	end := start.Add(load)
	for {
		next := end
		for _, x := range []time.Time{nextWorker, nextDispatcher} {
			if x.Before(next) {
				next = x
			}
		}
		timer := time.NewTimer(time.Until(next))
		select { // a schedule of faults, not synchronisation
		case <-t.Context().Done():
			timer.Stop()
			return f
		case <-timer.C:
		}
		switch {
		case !time.Now().Before(end):
			return f
		case !next.Before(nextDispatcher):
			gap := c.RestartDispatcher()
			t.Logf("soak: dispatcher restarted in %s", gap.Round(time.Millisecond))
			f.dispatcherGapMax = max(f.dispatcherGapMax, gap)
			f.dispatcherKills++
			nextDispatcher = nextDispatcher.Add(load / 3)
		default:
			i := f.workerKills % len(workers)
			workers[i].Kill()
			workers[i] = c.StartWorker(opts[i])
			f.workerKills++
			nextWorker = nextWorker.Add(load / 8)
		}
	}
}

// observer is a connection of the test's own, which the dispatcher's
// kills leave alone.
func observer(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("faulttest-observer"), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// waitDrained waits until the pool's consumer has nothing pending or
// unacknowledged: every accepted call has run to its result.
func waitDrained(t *testing.T, js jetstream.JetStream, cfg bus.Config) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cons, err := js.Consumer(t.Context(), cfg.CallsStream(), cfg.PoolConsumer("native"))
		if err == nil {
			info, err := cons.Info(t.Context())
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "the pool never drained")
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}
}

// auditRun is one audit over archive and live: its records by text
// (the call's unique argument), its summary, and how many of its records
// were read from the archive (below the live calls stream's first
// sequence when it started).
type auditRun struct {
	recs     map[string][]*audit.Record
	sum      *audit.Summary
	archived int
	took     time.Duration
}

func runAudit(t *testing.T, js jetstream.JetStream, store *blob.Bucket, f audit.Filter, o audit.Options) auditRun {
	t.Helper()
	began := time.Now()
	st, err := js.Stream(t.Context(), "TOOLWIRE_CALLS")
	require.NoError(t, err)
	liveFrom := st.CachedInfo().State.FirstSeq
	if st.CachedInfo().State.Msgs == 0 {
		liveFrom = st.CachedInfo().State.LastSeq + 1
	}
	src, err := audit.Open(t.Context(), js.Conn(), "toolwire")
	require.NoError(t, err)
	src.UseArchive(store)
	run := auditRun{recs: map[string][]*audit.Record{}}
	run.sum, err = src.Run(t.Context(), f, o, func(r *audit.Record) error {
		var in struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(r.Arguments, &in)
		r.Call, r.Events, r.Arguments, r.Response = nil, nil, nil, nil // keep the memory of 10,000s of records small
		run.recs[in.Text] = append(run.recs[in.Text], r)
		if r.Seq < liveFrom {
			run.archived++
		}
		return nil
	})
	require.NoError(t, err)
	run.took = time.Since(began)
	t.Logf("soak: audit (verify %v, since %s) of %d records (%d archived) in %s: %v", o.Verify, f.Since.Format(time.TimeOnly),
		run.sum.Records, run.archived, run.took.Round(100*time.Millisecond), run.sum.Outcomes)
	require.True(t, run.sum.OK(), "anomalies: %+v", run.sum.Anomalies)
	return run
}

// auditUntilSettled runs an audit over archive and live until no record
// is pending (results of the last calls may still be on their way).
func auditUntilSettled(t *testing.T, js jetstream.JetStream, store *blob.Bucket, f audit.Filter, o audit.Options) auditRun {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		run := runAudit(t, js, store, f, o)
		if run.sum.Outcomes[audit.OutcomePending] == 0 {
			return run
		}
		require.True(t, time.Now().Before(deadline), "calls still pending: %v", run.sum.Outcomes)
	}
}

// checkVerified: the audit with Verify read the archive (its segments
// and calls from it) and holds each call once.
func checkVerified(t *testing.T, verified auditRun) {
	t.Helper()
	require.Positive(t, verified.sum.ArchiveSegments)
	require.Positive(t, verified.archived, "the verified audit read nothing from the archive")
	for text, rs := range verified.recs {
		require.Len(t, rs, 1, text)
	}
}

// checkSoakLedger: the audit holds every accepted call once, under its id,
// with a terminal outcome, and nothing else but calls whose caller got an
// error; the tool that is not idempotent ran at most once a call, every
// call that succeeded at least once.
func checkSoakLedger(t *testing.T, c *faulttest.Cluster, load *soakLoad, recs map[string][]*audit.Record) {
	t.Helper()
	load.mu.Lock()
	defer load.mu.Unlock()
	execs := faulttest.Executions(faulttest.ReadLedger(t, c.Ledger))
	for text, id := range load.accepted {
		rs := recs[text]
		require.Len(t, rs, 1, "accepted call %s (%s, unconfirmed %v) audited %d times", id, text, load.unconfirmed[id], len(rs))
		require.Equal(t, id, rs[0].CallID, text)
		require.NotContains(t, []string{audit.OutcomePending, audit.OutcomeMissing}, rs[0].Outcome, "%s: %s", id, rs[0].Outcome)
		if load.tools[text] == "ledger" {
			require.LessOrEqual(t, execs[id], 1, "%s (not idempotent) ran %d times", id, execs[id])
		}
		if rs[0].Outcome == audit.OutcomeOK {
			require.Positive(t, execs[id], "%s succeeded without running", id)
		}
	}
	for text, rs := range recs {
		if _, ok := load.accepted[text]; ok {
			continue
		}
		_, errored := load.errored[text]
		require.True(t, errored, "call %q is in the record but was neither accepted nor answered with an error", text)
		require.Len(t, rs, 1, text)
		load.storedAfterError++
	}
}

// countResults counts the result messages of each call over the archive
// and the live results stream (each sequence once), and which calls have
// one in the live stream.
func countResults(t *testing.T, js jetstream.JetStream, store *blob.Bucket, stream string) (map[string]int, map[string]bool) {
	t.Helper()
	ctx := t.Context()
	bySeq := map[uint64]string{}
	live := map[string]bool{}
	callOf := func(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }
	st, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	last := st.CachedInfo().State.LastSeq
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for seq := uint64(0); seq < last; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			require.NoError(t, err)
			seq = md.Sequence.Stream
			bySeq[seq] = callOf(m.Subject())
			live[bySeq[seq]] = true
			n++
		}
		require.NoError(t, batch.Error())
		if n == 0 {
			info, err := st.Info(ctx)
			require.NoError(t, err)
			if info.State.Msgs == 0 || info.State.FirstSeq > last {
				break // aged out: the archive holds the rest
			}
			require.True(t, time.Now().Before(deadline), "the results stream ended at %d before %d", seq, last)
		}
	}
	require.NoError(t, archive.NewReader(store).Each(ctx, stream, archive.Query{}, func(m *archive.Message) bool {
		bySeq[m.Seq] = callOf(m.Subject)
		return true
	}))
	out := map[string]int{}
	for _, id := range bySeq {
		out[id]++
	}
	return out, live
}

// verifySoakArchive verifies the chains of the three archived streams and
// returns their segment counts; nothing was dropped before it was
// archived.
func verifySoakArchive(t *testing.T, store *blob.Bucket, cfg bus.Config) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, stream := range []string{cfg.CallsStream(), cfg.ResultsStream(), cfg.EventsStream()} {
		rep, err := archive.Verify(t.Context(), store, stream, archive.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, rep.OK(), "%s: %+v", stream, rep.Problems)
		require.Positive(t, rep.Segments, stream)
		segs, err := archive.NewReader(store).Segments(t.Context(), stream)
		require.NoError(t, err)
		for _, m := range segs {
			require.Zero(t, m.DroppedBeforeArchive, "%s segment %d", stream, m.Index)
		}
		out[strings.TrimPrefix(stream, "TOOLWIRE_")] = rep.Segments
	}
	return out
}

// soakArchivedReads is how many results checkArchivedReads reads from
// the archive, spread over the archived calls. Each read loads the
// segments from a minute before the call (believed.ArchiveSlack, clock
// skew) to its result: a dozen of the soak's 5 s segments, where
// production's hour-long segments make it one or two.
const soakArchivedReads = 25

// checkArchivedReads asks the dispatcher for the results of up to
// soakArchivedReads accepted calls whose results the live results stream
// no longer holds (live: the calls with a result message in it when the
// results were counted): each is answered from the archive with the
// audited outcome. It returns how many.
func checkArchivedReads(t *testing.T, c *faulttest.Cluster, load *soakLoad, recs map[string][]*audit.Record, live map[string]bool) int {
	t.Helper()
	load.mu.Lock()
	var old []string
	for text, id := range load.accepted {
		if !live[id] {
			old = append(old, text)
		}
	}
	load.mu.Unlock()
	sort.Strings(old)
	require.NotEmpty(t, old, "every accepted call's result is still in the live results stream")
	n := 0
	for i := 0; i < len(old) && n < soakArchivedReads; i += max(1, len(old)/soakArchivedReads) {
		rec := recs[old[i]][0]
		resp, err := c.Result(t.Context(), rec.CallID, 0)
		require.NoError(t, err, rec.CallID)
		require.Equal(t, rec.Outcome == audit.OutcomeOK, resp.GetOk(), rec.CallID)
		n++
	}
	return n
}

// countingHandler counts the dispatcher's log lines at warn and above by
// message, holding no more than their counts.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			key += ": " + strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, a.Value.String())
		}
		return true
	})
	h.counts[key]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) summary() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}
