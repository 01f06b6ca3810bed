package callindex

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// checkIndex verifies the index's internal invariants: the ring's
// sequences increase, every call is found by id in its own slot and the
// id table holds nothing else, every symbol's count is the number of
// columns that name it, and every arena slab's count is the number of
// texts in it, with no slab but the one being filled kept without texts.
func checkIndex(t *testing.T, x *Index) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	require.Equal(t, x.n, len(x.seq))
	refs := map[uint32]uint32{}
	live := map[uint64]int32{}
	for k := range x.n {
		i := x.slot(k)
		if k > 0 {
			require.Greater(t, x.seq[i], x.seq[x.slot(k-1)], "sequences increase along the ring")
		}
		require.Equal(t, i, x.ids.find(&x.id[i], x.id), "call %d is found in its slot", k)
		for _, s := range []uint32{x.tenant[i], x.agent[i], x.session[i], x.tool[i], x.worker[i], x.errType[i]} {
			if s != 0 {
				refs[s]++
			}
		}
		if r := x.text[i]; r != 0 {
			live[r>>28]++
			_ = x.arena.get(r) // never a released slab
		}
	}
	used := 0
	for _, s := range x.ids.slots {
		if s != 0 {
			used++
		}
	}
	require.Equal(t, x.n, used, "the id table holds exactly the calls")
	require.Len(t, x.syms.ids, len(refs), "symbols in use")
	for name, id := range x.syms.ids {
		require.Equal(t, name, x.syms.names[id])
		require.Equal(t, refs[id], x.syms.refs[id], "references of %q", name)
	}
	for i, s := range x.arena.slabs {
		n := live[x.arena.base+uint64(i)]
		require.Equal(t, n, x.arena.live[i], "texts in slab %d", i)
		if s == nil {
			require.Zero(t, n)
		} else if i < len(x.arena.slabs)-1 {
			require.Positive(t, n, "slab %d of %d has no text left but is kept", i, len(x.arena.slabs))
		}
	}
}

func mustULID(t *testing.T, s string) *[16]byte {
	t.Helper()
	id, err := ulid.ParseStrict(s)
	require.NoError(t, err)
	return (*[16]byte)(&id)
}

// Random adds, results, re-results and evictions keep every invariant of
// the ring, the id table, the symbols and the arena, and queries agree
// with a plain model of the newest max calls.
func TestReviewIndexInvariantsUnderRandomChurn(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 2, 7, 300, 512} { // 512: the id table at its highest load
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		x := mustNew(t, Config{Max: size})
		type call struct {
			e    Entry
			text string
		}
		var made []call
		seq := uint64(0)
		for step := range 4000 {
			switch r := rng.IntN(10); {
			case r < 6 || len(made) == 0:
				e, args := synthetic(len(made))
				seq += 1 + uint64(rng.IntN(3))
				e.Seq = seq
				e.Outcome, e.Worker = audit.OutcomePending, ""
				e.Agent = fmt.Sprintf("a%d", rng.IntN(4))
				if rng.IntN(4) == 0 {
					args = nil // no argument text (an unknown spec version)
				}
				require.True(t, x.add(e, args, nil, false))
				made = append(made, call{e: e, text: string(args)})
			default: // a result (or a second one) for a recent call, maybe evicted
				c := &made[len(made)-1-rng.IntN(min(len(made), 2*size))]
				res := []byte(fmt.Sprintf("result-%d", step))
				if rng.IntN(3) == 0 {
					res = nil
				}
				u := outcomeUpdate{outcome: audit.OutcomeError, errType: fmt.Sprintf("E%d", rng.IntN(3)), worker: fmt.Sprintf("w%d", rng.IntN(5)), dur: time.Millisecond}
				_, kept := x.Get(c.e.ID)
				require.Equal(t, kept, x.setOutcome(mustULID(t, c.e.ID), u, res))
				if kept {
					c.e.Outcome, c.e.ErrorType, c.e.Worker, c.e.Duration = u.outcome, u.errType, u.worker, u.dur
				}
			}
			if step%97 == 0 {
				checkIndex(t, x)
			}
		}
		checkIndex(t, x)
		kept := made[max(0, len(made)-size):]
		page, _, matched := x.Query(Query{Limit: MaxQueryLimit})
		require.Equal(t, len(kept), matched)
		for i, e := range page {
			require.Equal(t, kept[len(kept)-1-i].e, e, "max %d, call %d from the newest", size, i)
		}
	}
}

// A slab of the arena whose texts were all released while it was still
// the one being filled is freed once the next slab is started, not kept
// for ever.
func TestReviewArenaFreesASlabEmptiedWhileFilled(t *testing.T) {
	t.Parallel()
	const max = 4
	x := mustNew(t, Config{Max: max})
	long := bytes.Repeat([]byte("x"), searchTextMax)
	k := 0
	add := func(args []byte) {
		e, _ := synthetic(k)
		k++
		require.True(t, x.add(e, args, nil, false))
	}
	for round := range 5 {
		// Fill most of the current slab, then push its texts out with
		// calls that have none (their spec versions unknown).
		for x.arena.slabs == nil || len(x.arena.slabs[len(x.arena.slabs)-1])+searchTextMax <= slabSize {
			add(long)
		}
		for range max {
			add(nil)
		}
		add(long) // the first of a new slab
		add(long)
		checkIndex(t, x)
		require.LessOrEqual(t, x.arena.bytes(), int64(2*slabSize+4096), "round %d", round)
	}
}

// startRun runs x until the returned stop is called, which waits for the run
// to return and checks it returned nil.
func startRun(t *testing.T, x *Index) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(indexWait):
				t.Fatal("Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// A second run of the same index (as the Feed starts after a
// failure) carries on from the newest call: the calls and results stored
// meanwhile are indexed once, the calls indexed before keep their
// outcomes and their result text (a secret call's too, though its
// secrets are no longer held), and live updates reach new subscribers.
func TestReviewIndexRunAgainCarriesOn(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	signin := indexCall(t, s, indexAcme, "signin", `{"user":"ann","token":"tok-run-4711"}`, "")
	x := mustNew(t, Config{Streams: StreamsOf(s.Env.Bus), Specs: s.Registry, Logger: slog.New(slog.DiscardHandler)})
	stop := startRun(t, x)
	select {
	case <-x.Ready():
	case <-time.After(indexWait):
		t.Fatal("never ready")
	}
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	live := indexCall(t, s, indexAcme, "echo", `{"text":"first-run"}`, "")
	nextUpdate(t, ch, live.CallId, audit.OutcomeOK)
	page, _, _ := x.Query(Query{Text: "signed in ann with [redacted]"})
	require.Equal(t, []string{signin.CallId}, ids(page))
	stop()
	_, open := <-ch
	require.False(t, open, "Run closes the subscriptions it served")

	between := indexCall(t, s, indexGlobex, "echo", `{"text":"between-runs"}`, "")
	startRun(t, x)
	require.Eventually(t, func() bool {
		e, ok := x.Get(between.CallId)
		return ok && e.Outcome == audit.OutcomeOK
	}, indexWait, 5*time.Millisecond, "the call made between the runs is indexed with its result")
	ch, cancel, err = x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	after := indexCall(t, s, indexAcme, "echo", `{"text":"second-run"}`, "")
	nextUpdate(t, ch, after.CallId, audit.OutcomeOK)

	st := x.Stats()
	require.Equal(t, 4, st.Entries, "no call indexed twice")
	require.Zero(t, st.Orphans)
	page, _, _ = x.Query(Query{})
	require.Equal(t, []string{after.CallId, between.CallId, live.CallId, signin.CallId}, ids(page))
	for _, e := range page {
		require.Equal(t, audit.OutcomeOK, e.Outcome, e.Tool)
	}
	for text, want := range map[string]string{"first-run": live.CallId, "between-runs": between.CallId, "second-run": after.CallId,
		"signed in ann with [redacted]": signin.CallId} {
		page, _, _ = x.Query(Query{Text: text})
		require.Equal(t, []string{want}, ids(page), "text %q", text)
	}
	page, _, _ = x.Query(Query{Text: "tok-run"})
	require.Empty(t, page)
	checkIndex(t, x)
}

// Calls and results stored before and while the index rebuilds (some
// results before their calls, some calls with a retry re-entry) are all
// indexed, each once and with its outcome, from the rebuild through the
// handover to the live consumers.
func TestReviewIndexRebuildToLiveHandoverUnderLoad(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	b := s.Env.Bus
	subject := b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "acme", "test", "ghost")
	want := map[string]string{}
	var order []string
	publish := func(k int) {
		id := ulid.Make().String()
		call := &toolwirev1.ToolCall{CallId: id, Tool: "ghost", SpecVersion: "v-gone", Caller: &toolwirev1.Caller{Tenant: "acme"}}
		res := &toolwirev1.ToolResponse{CallId: id, Tool: "ghost", Ok: true, Meta: &toolwirev1.ResponseMeta{Worker: "w-1"}}
		want[id] = audit.OutcomeOK
		if k%4 == 0 {
			res.Ok, res.Error = false, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT}
			want[id] = audit.OutcomeError
		}
		resultSubject := b.Subjects.Result("acme", "elsewhere", id)
		if k%3 == 0 {
			publishResult(t, b, resultSubject, res)
			publishCall(t, b.JS, subject, call, id)
		} else {
			publishCall(t, b.JS, subject, call, id)
			if k%5 == 0 {
				publishCall(t, b.JS, subject, call, id+"-retry-1")
			}
			publishResult(t, b, resultSubject, res)
		}
		order = append(order, id)
	}
	k := 0
	for ; k < 300; k++ {
		publish(k)
	}
	x := mustNew(t, Config{Streams: StreamsOf(b), Specs: registry.NewStore(b.Registry, nil), Logger: slog.New(slog.DiscardHandler)})
	startRun(t, x)
	for after := -1; after < 100; k++ {
		require.Less(t, k, 100_000, "never ready")
		publish(k)
		select {
		case <-x.Ready():
			after++
		default:
		}
	}
	require.Eventually(t, func() bool {
		_, _, matched := x.Query(Query{Outcome: audit.OutcomePending})
		return x.Stats().Entries == len(order) && matched == 0
	}, indexWait, 10*time.Millisecond, "every call indexed with its outcome")
	st := x.Stats()
	require.Zero(t, st.Orphans)
	require.Zero(t, st.Skipped)
	require.Zero(t, st.Lag)
	page, _, _ := x.Query(Query{Limit: MaxQueryLimit})
	for i, e := range page {
		id := order[len(order)-1-i]
		require.Equal(t, id, e.ID)
		require.Equal(t, want[id], e.Outcome, id)
	}
	_, _, matched := x.Query(Query{Outcome: audit.OutcomeError})
	require.Equal(t, (len(order)+3)/4, matched)
	checkIndex(t, x)
}

// Queries agree with a plain scan of the newest calls for every mix of
// cursor, time range (stored times going back by less than TimeSlack
// along the sequence), filters and text, around the ring's wrap.
func TestReviewIndexQueryAgreesWithAPlainScan(t *testing.T) {
	t.Parallel()
	const size, total = 500, 1300
	rng := rand.New(rand.NewPCG(7, 7))
	x := mustNew(t, Config{Max: size})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	type call struct {
		e    Entry
		text string
	}
	var made []call
	for k := range total {
		at := base.Add(time.Duration(k)*time.Second - time.Duration(rng.IntN(50))*time.Second) // skew under TimeSlack
		e := Entry{ID: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Seq: uint64(3*k + 1), Time: at,
			Tenant: fmt.Sprintf("t%d", rng.IntN(3)), Tool: fmt.Sprintf("tool%d", rng.IntN(4)), Outcome: audit.OutcomePending}
		text := fmt.Sprintf(`{"w":"%c%c"}`, 'a'+rng.IntN(4), 'a'+rng.IntN(4))
		require.True(t, x.add(e, []byte(text), nil, false))
		if rng.IntN(3) == 0 {
			e.Outcome = audit.OutcomeOK
			require.True(t, x.setOutcome(mustULID(t, e.ID), outcomeUpdate{outcome: e.Outcome}, []byte("Done")))
			text += "\x00done"
		}
		made = append(made, call{e, text})
	}
	kept := made[total-size:]
	at := func(k int) time.Time { return base.Add(time.Duration(k) * time.Second) }
	for range 3000 {
		q := Query{Limit: 1 + rng.IntN(60)}
		if rng.IntN(2) == 0 {
			q.Before = kept[rng.IntN(size)].e.Seq + uint64(rng.IntN(3))
		}
		if rng.IntN(2) == 0 {
			q.Since = at(total - size + rng.IntN(size+100) - 50)
		}
		if rng.IntN(2) == 0 {
			q.Until = at(total - size + rng.IntN(size+100) - 50)
		}
		if rng.IntN(3) == 0 {
			q.Tenant = fmt.Sprintf("t%d", rng.IntN(4))
		}
		if rng.IntN(3) == 0 {
			q.Tool = fmt.Sprintf("tool%d", rng.IntN(4))
		}
		if rng.IntN(3) == 0 {
			q.Outcome = []string{audit.OutcomeOK, audit.OutcomePending}[rng.IntN(2)]
		}
		if rng.IntN(3) == 0 {
			q.Text = []string{"A", "bc", `"w":"c`, "done", "one"}[rng.IntN(5)]
		}
		var want []Entry
		for i := len(kept) - 1; i >= 0; i-- {
			e, text := kept[i].e, kept[i].text
			if (q.Before != 0 && e.Seq >= q.Before) || (!q.Since.IsZero() && e.Time.Before(q.Since)) ||
				(!q.Until.IsZero() && e.Time.After(q.Until)) || (q.Tenant != "" && e.Tenant != q.Tenant) ||
				(q.Tool != "" && e.Tool != q.Tool) || (q.Outcome != "" && e.Outcome != q.Outcome) ||
				(q.Text != "" && !searchHas(text, q.Text)) {
				continue
			}
			want = append(want, e)
		}
		page, next, matched := x.Query(q)
		require.Equal(t, len(want), matched, "%+v", q)
		require.Equal(t, want[:min(len(want), q.Limit)], append([]Entry(nil), page...), "%+v", q)
		if len(want) > q.Limit {
			require.Equal(t, want[q.Limit-1].Seq, next, "%+v", q)
		} else {
			require.Zero(t, next, "%+v", q)
		}
	}
}

// searchHas reports whether text (a call's search text) holds
// the lowercased needle within its argument or its result part.
func searchHas(text, needle string) bool {
	for _, part := range bytes.Split([]byte(text), []byte{textSep}) {
		if bytes.Contains(bytes.ToLower(part), bytes.ToLower([]byte(needle))) {
			return true
		}
	}
	return false
}

// A secret call's result read before the call (held as an orphan, not
// redacted yet) is redacted with the call's secrets when the call comes;
// a secret call's result too long to be redacted safely has no result
// text.
func TestReviewIndexSecretsOfResultsBeforeTheirCalls(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	b := s.Env.Bus
	ent, err := s.Registry.Get("signin")
	require.NoError(t, err)
	x := runIndex(t, s, 0)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	// On a subject no pool serves: no worker answers these calls.
	subject := b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "acme", "test", "ghost")
	signin := func(user, token, result string, resultFirst bool) string {
		id := ulid.Make().String()
		call := &toolwirev1.ToolCall{CallId: id, Tool: "signin", SpecVersion: ent.Spec.Version, Caller: &toolwirev1.Caller{Tenant: "acme"},
			Arguments: fmt.Appendf(nil, `{"user":%q,"token":%q}`, user, token)}
		res := &toolwirev1.ToolResponse{CallId: id, Tool: "signin", Ok: true,
			Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: result}}}}}
		if resultFirst {
			publishResult(t, b, b.Subjects.Result("acme", "elsewhere", id), res)
			require.Eventually(t, func() bool { return x.Stats().Orphans == 1 }, indexWait, 5*time.Millisecond)
		}
		publishCall(t, b.JS, subject, call, id)
		if !resultFirst {
			nextUpdate(t, ch, id, audit.OutcomePending)
			publishResult(t, b, b.Subjects.Result("acme", "elsewhere", id), res)
		}
		nextUpdate(t, ch, id, audit.OutcomeOK)
		return id
	}
	early := signin("eve", "tok-orphan-4711", "signed in eve with tok-orphan-4711", true)
	long := signin("fay", "tok-long-4711", strings.Repeat("x", resultTextScan)+" tok-long-4711", false)
	longEarly := signin("gus", "tok-longer-4711", "signed in gus "+strings.Repeat("y", resultTextScan), true)

	for _, secret := range []string{"tok-orphan", "tok-long", "4711"} {
		page, _, _ := x.Query(Query{Text: secret})
		require.Empty(t, ids(page), "secret %q", secret)
	}
	page, _, _ := x.Query(Query{Text: "signed in eve with [redacted]"})
	require.Equal(t, []string{early}, ids(page))
	page, _, _ = x.Query(Query{Text: "xxx"})
	require.Empty(t, page, "a secret call's result cut at %d bytes is not indexed", resultTextScan)
	page, _, _ = x.Query(Query{Text: "signed in gus"})
	require.Empty(t, page)
	page, _, _ = x.Query(Query{Text: `"token":"[redacted]"`})
	require.ElementsMatch(t, []string{early, long, longEarly}, ids(page), "their arguments are indexed, redacted")
}

// A replay (a call on a shadow subject, answered on the replay
// dispatcher's results) is no call of the list, and its result does not
// wait for a call that never comes.
func TestReviewIndexSkipsReplaysAndTheirResults(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	b := s.Env.Bus
	x := runIndex(t, s, 0)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	id := ulid.Make().String()
	shadow := &toolwirev1.ToolCall{CallId: id, Tool: "echo", Caller: &toolwirev1.Caller{Tenant: "acme"}, Dispatcher: bus.ReplayDispatcher}
	publishCall(t, b.JS, b.Subjects.Shadow(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "acme", "builtin", "echo"), shadow, id)
	publishResult(t, b, b.Subjects.Result("acme", bus.ReplayDispatcher, id), &toolwirev1.ToolResponse{CallId: id, Tool: "echo", Ok: true})
	after := indexCall(t, s, indexAcme, "echo", `{"text":"after the replay"}`, "")
	nextUpdate(t, ch, after.CallId, audit.OutcomeOK)
	_, ok := x.Get(id)
	require.False(t, ok)
	st := x.Stats()
	require.Equal(t, 1, st.Entries)
	require.Zero(t, st.Orphans, "the replay's result waits for no call")
}
