package callindex

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// indexWait bounds every wait of these tests (a loaded 2-core machine).
const indexWait = 30 * time.Second

var (
	indexAcme   = identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	indexGlobex = identity.Identity{Tenant: "globex", Agent: "crawler", Scopes: []string{"*"}}
)

// indexTools are the built-in tools, signin (its token is secret and its
// result repeats it) and hold (runs until release is closed or it is
// cancelled).
func indexTools(release <-chan struct{}) []*tool.Tool {
	type signin struct {
		User  string `json:"user"`
		Token string `json:"token" toolwire:"secret"`
	}
	return append(builtin.Tools(),
		tool.Must(tool.New("signin", func(_ context.Context, in signin) (string, error) {
			return "signed in " + in.User + " with " + in.Token, nil
		})),
		tool.Must(tool.New("hold", func(ctx context.Context, _ struct{}) (string, error) {
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		})))
}

// startIndexStack starts a real toolwire (embedded JetStream, dispatcher,
// in-process worker) serving indexTools(release).
func startIndexStack(t *testing.T, release <-chan struct{}) *dispatchtest.Stack {
	t.Helper()
	// No orphan sweep: calls published here on subjects no pool serves
	// stay as they are.
	return dispatchtest.Start(t, dispatchtest.Options{Tools: indexTools(release), Dispatcher: dispatch.Config{OrphanSweep: -1}})
}

// runIndex runs an index of s's streams until the test ends, and waits
// for it to be ready.
func runIndex(t *testing.T, s *dispatchtest.Stack, max int) *Index {
	t.Helper()
	x := mustNew(t, Config{Streams: StreamsOf(s.Env.Bus), Specs: s.Registry, Max: max, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-x.Ready():
	case err := <-done:
		t.Fatalf("the index stopped before it was ready: %v", err)
	case <-time.After(indexWait):
		t.Fatal("the index was never ready")
	}
	return x
}

// indexCall makes a call and waits for its result.
func indexCall(t *testing.T, s *dispatchtest.Stack, id identity.Identity, tool, args, session string) *toolwirev1.CallResponse {
	t.Helper()
	r, err := s.Dispatcher.Call(t.Context(), id, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args, Session: session}, indexWait)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, "call of %s", tool)
	return r
}

// ids are the ids of a page.
func ids(page []Entry) []string {
	var out []string
	for _, e := range page {
		out = append(out, e.ID)
	}
	return out
}

// Calls stored before the index starts are there once it is ready, with
// their outcomes, and every filter selects them.
func TestIndexFindsCallsStoredBeforeItStarts(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	echo := indexCall(t, s, indexAcme, "echo", `{"text":"Needle-In-Acme"}`, "s-1")
	failed := indexCall(t, s, indexAcme, "fail", `{"type":"TIMEOUT","message":"no answer from upstream-7","retryable":false}`, "s-1")
	mark := time.Now()
	other := indexCall(t, s, indexGlobex, "echo", `{"text":"needle-in-globex"}`, "s-2")

	x := runIndex(t, s, 0)
	require.Equal(t, 3, x.Stats().Entries)
	e, ok := x.Get(echo.CallId)
	require.True(t, ok)
	require.Equal(t, "acme", e.Tenant)
	require.Equal(t, "bot", e.Agent)
	require.Equal(t, "s-1", e.Session)
	require.Equal(t, "echo", e.Tool)
	require.Equal(t, audit.OutcomeOK, e.Outcome)
	require.Empty(t, e.ErrorType)
	require.NotEmpty(t, e.Worker)
	require.Positive(t, e.Duration)
	require.WithinDuration(t, mark, e.Time, time.Minute)
	f, ok := x.Get(failed.CallId)
	require.True(t, ok)
	require.Equal(t, audit.OutcomeError, f.Outcome)
	require.Equal(t, "TIMEOUT", f.ErrorType)
	_, ok = x.Get(ulid.Make().String())
	require.False(t, ok, "an unknown id")
	_, ok = x.Get("not-a-ulid")
	require.False(t, ok)

	for _, c := range []struct {
		name string
		q    Query
		want []string
	}{
		{"all, newest first", Query{}, []string{other.CallId, failed.CallId, echo.CallId}},
		{"tool", Query{Tool: "echo"}, []string{other.CallId, echo.CallId}},
		{"tenant", Query{Tenant: "acme"}, []string{failed.CallId, echo.CallId}},
		{"agent", Query{Agent: "crawler"}, []string{other.CallId}},
		{"session", Query{Session: "s-1"}, []string{failed.CallId, echo.CallId}},
		{"outcome", Query{Outcome: audit.OutcomeError}, []string{failed.CallId}},
		{"tenant and outcome", Query{Tenant: "acme", Outcome: audit.OutcomeOK}, []string{echo.CallId}},
		{"error type, any case", Query{ErrorType: "timeout"}, []string{failed.CallId}},
		{"error type with its prefix", Query{ErrorType: "ERROR_TYPE_TIMEOUT"}, []string{failed.CallId}},
		{"since", Query{Since: mark}, []string{other.CallId}},
		{"until", Query{Until: mark}, []string{failed.CallId, echo.CallId}},
		{"text in arguments, any case", Query{Text: "NEEDLE-in"}, []string{other.CallId, echo.CallId}},
		{"text in a result", Query{Text: "upstream-7"}, []string{failed.CallId}},
		{"text and tenant", Query{Text: "needle", Tenant: "globex"}, []string{other.CallId}},
		{"unknown tool", Query{Tool: "nope"}, nil},
		{"unknown outcome", Query{Outcome: "fine"}, nil},
		{"text nowhere", Query{Text: "haystack"}, nil},
	} {
		page, next, matched := x.Query(c.q)
		require.Equal(t, c.want, ids(page), c.name)
		require.Equal(t, len(c.want), matched, c.name)
		require.Zero(t, next, c.name)
	}

	// Pages of one follow each other by cursor.
	page, next, matched := x.Query(Query{Limit: 2})
	require.Equal(t, []string{other.CallId, failed.CallId}, ids(page))
	require.Equal(t, 3, matched)
	require.Equal(t, page[1].Seq, next)
	page, next, _ = x.Query(Query{Limit: 2, Before: next})
	require.Equal(t, []string{echo.CallId}, ids(page))
	require.Zero(t, next)
	page, next, _ = x.Query(Query{Tool: "echo", Limit: 1})
	require.Equal(t, []string{other.CallId}, ids(page))
	page, next, _ = x.Query(Query{Tool: "echo", Limit: 1, Before: next})
	require.Equal(t, []string{echo.CallId}, ids(page))
	require.Zero(t, next)
}

// nextUpdate reads ch until the update of call id with the outcome.
func nextUpdate(t *testing.T, ch <-chan Entry, id, outcome string) Entry {
	t.Helper()
	deadline := time.NewTimer(indexWait)
	defer deadline.Stop()
	for {
		select {
		case e, ok := <-ch:
			require.True(t, ok, "the subscription ended")
			if e.ID == id && e.Outcome == outcome {
				return e
			}
		case <-deadline.C:
			t.Fatalf("no %s update of %s", outcome, id)
		}
	}
}

// Calls made once the index runs reach subscribers when they are admitted
// and again when their outcome is known; queries see them too.
func TestIndexFollowsLiveCallsAndOutcomes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := startIndexStack(t, release)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	x := runIndex(t, s, 0)
	require.Zero(t, x.Stats().Entries)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()

	held, err := s.Dispatcher.Submit(t.Context(), indexAcme, &toolwirev1.CallRequest{Tool: "hold", ArgumentsJson: `{}`})
	require.NoError(t, err)
	pending := nextUpdate(t, ch, held.CallID, audit.OutcomePending)
	require.Equal(t, "hold", pending.Tool)
	require.Zero(t, pending.Duration)
	page, _, _ := x.Query(Query{Outcome: audit.OutcomePending})
	require.Equal(t, []string{held.CallID}, ids(page))
	close(release)
	done := nextUpdate(t, ch, held.CallID, audit.OutcomeOK)
	require.NotEmpty(t, done.Worker)
	require.Equal(t, pending.Seq, done.Seq)

	failed := indexCall(t, s, indexGlobex, "fail", `{"type":"VALIDATION","retryable":false}`, "")
	e := nextUpdate(t, ch, failed.CallId, audit.OutcomeError)
	require.Equal(t, "VALIDATION", e.ErrorType)
	require.Equal(t, "globex", e.Tenant)

	page, _, matched := x.Query(Query{})
	require.Equal(t, []string{failed.CallId, held.CallID}, ids(page))
	require.Equal(t, 2, matched)
	st := x.Stats()
	require.True(t, st.Ready)
	require.Equal(t, 1, st.Subscribers)
	require.Positive(t, st.Bytes)
	require.Equal(t, e.Seq, st.LastSeq)
	cancel()
	require.Zero(t, x.Stats().Subscribers)
}

// A cancelled call is listed as cancelled.
func TestIndexShowsCancelledCalls(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	x := runIndex(t, s, 0)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	held, err := s.Dispatcher.Submit(t.Context(), indexAcme, &toolwirev1.CallRequest{Tool: "hold", ArgumentsJson: `{}`})
	require.NoError(t, err)
	nextUpdate(t, ch, held.CallID, audit.OutcomePending)
	_, err = s.Dispatcher.Cancel(t.Context(), indexAcme, held.CallID, "changed my mind")
	require.NoError(t, err)
	e := nextUpdate(t, ch, held.CallID, audit.OutcomeCancelled)
	require.Equal(t, "CANCELLED", e.ErrorType)
	page, _, _ := x.Query(Query{Outcome: audit.OutcomeCancelled})
	require.Equal(t, []string{held.CallID}, ids(page))
}

// A secret argument is never searchable: not in the arguments, not where
// the result repeats it, whether the call was indexed by the rebuild or
// live; and a call whose spec version is unknown has no argument text at
// all, and its result text is redacted of every argument value.
func TestIndexNeverIndexesSecrets(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	before := indexCall(t, s, indexAcme, "signin", `{"user":"ann","token":"tok-before-4711"}`, "")
	require.True(t, before.Response.Ok)
	x := runIndex(t, s, 0)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	after := indexCall(t, s, indexAcme, "signin", `{"user":"bob","token":"tok-after-4711"}`, "")
	nextUpdate(t, ch, after.CallId, audit.OutcomeOK)

	for _, secret := range []string{"tok-before", "tok-after", "4711", "TOK-"} {
		page, _, _ := x.Query(Query{Text: secret})
		require.Empty(t, page, "a secret argument was found by %q", secret)
	}
	page, _, _ := x.Query(Query{Text: `"user":"ann"`})
	require.Equal(t, []string{before.CallId}, ids(page), "the other arguments are searchable")
	page, _, _ = x.Query(Query{Text: "signed in bob with [redacted]"})
	require.Equal(t, []string{after.CallId}, ids(page), "the result is searchable, redacted")
	page, _, _ = x.Query(Query{Text: `"token":"[redacted]"`})
	require.Len(t, page, 2)

	// A call of a spec version the registry does not have (published as
	// a dispatcher would; no worker serves its type), then its result.
	b := s.Env.Bus
	id := ulid.Make().String()
	call := &toolwirev1.ToolCall{CallId: id, Tool: "ghost", SpecVersion: "v-gone", Arguments: []byte(`{"note":"plain-words-here"}`),
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot"}, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX}
	publishCall(t, b.JS, b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "acme", "test", "ghost"), call, id)
	e := nextUpdate(t, ch, id, audit.OutcomePending)
	require.Equal(t, "ghost", e.Tool)
	page, _, _ = x.Query(Query{Text: "plain-words"})
	require.Empty(t, page, "arguments of an unknown spec version are not indexed")
	publishResult(t, b, b.Subjects.Result("acme", "elsewhere", id), &toolwirev1.ToolResponse{CallId: id, Tool: "ghost",
		Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "ghost refused plain-words-here today"}})
	e = nextUpdate(t, ch, id, audit.OutcomeError)
	require.Equal(t, "PERMANENT", e.ErrorType)
	page, _, _ = x.Query(Query{Text: "plain-words"})
	require.Empty(t, page, "a result is redacted of every value of arguments of an unknown spec")
	page, _, _ = x.Query(Query{Text: "ghost refused [redacted] today"})
	require.Equal(t, []string{id}, ids(page))
}

// publishCall stores a call on CALLS as a dispatcher does (its id as
// Nats-Msg-Id), or as a retry re-entry when msgID differs.
func publishCall(t *testing.T, js jetstream.JetStream, subject string, call *toolwirev1.ToolCall, msgID string) uint64 {
	t.Helper()
	data, err := proto.Marshal(call)
	require.NoError(t, err)
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	ack, err := js.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	return ack.Sequence
}

// publishResult stores a result on RESULTS as a dispatcher does: signed
// with b's key, enrolled as a dispatcher's (internal/signing).
func publishResult(t *testing.T, b *bus.Bus, subject string, resp *toolwirev1.ToolResponse) {
	t.Helper()
	data, err := proto.Marshal(resp)
	require.NoError(t, err)
	require.NoError(t, registry.EnrolDispatcher(t.Context(), b.Registry, b.Signer.Public(), "test"))
	_, err = b.JS.PublishMsg(t.Context(), b.Signer.SignedMsg(subject, signing.KindResult, resp.CallId, resp.GetMeta().GetAttempt(), data, nil))
	require.NoError(t, err)
}

// A result stored before its call (as the two streams' consumers may
// deliver them) is kept until the call comes; retry re-entries and
// undecodable messages are no calls.
func TestIndexResultBeforeItsCallAndMessagesThatAreNoCalls(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	b := s.Env.Bus
	x := runIndex(t, s, 0)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	subject := b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "acme", "test", "ghost")

	id := ulid.Make().String()
	publishResult(t, b, b.Subjects.Result("acme", "elsewhere", id), &toolwirev1.ToolResponse{CallId: id, Tool: "ghost", Ok: true,
		Meta: &toolwirev1.ResponseMeta{Worker: "w-9", Duration: durationpb.New(1500 * time.Millisecond)}})
	require.Eventually(t, func() bool { return x.Stats().Orphans == 1 }, indexWait, 5*time.Millisecond, "the result waits for its call")
	call := &toolwirev1.ToolCall{CallId: id, Tool: "ghost", SpecVersion: "v-gone", Caller: &toolwirev1.Caller{Tenant: "acme"}}
	seq := publishCall(t, b.JS, subject, call, id)
	e := nextUpdate(t, ch, id, audit.OutcomeOK)
	require.Equal(t, "w-9", e.Worker)
	require.Equal(t, 1500*time.Millisecond, e.Duration)
	require.Equal(t, seq, e.Seq)
	require.Zero(t, x.Stats().Orphans)

	publishCall(t, b.JS, subject, call, id+"-retry-1") // a retry re-entry
	other := ulid.Make().String()
	m := nats.NewMsg(subject)
	m.Data = []byte("not a call")
	m.Header.Set(jetstream.MsgIDHeader, ulid.Make().String())
	_, err = b.JS.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	last := publishCall(t, b.JS, subject, &toolwirev1.ToolCall{CallId: other, Tool: "ghost", Caller: &toolwirev1.Caller{Tenant: "acme"}}, other)
	nextUpdate(t, ch, other, audit.OutcomePending)
	st := x.Stats()
	require.Equal(t, 2, st.Entries)
	require.Equal(t, last, st.LastSeq)
	require.Equal(t, uint64(1), st.Skipped)
	e, _ = x.Get(id)
	require.Equal(t, seq, e.Seq, "the re-entry is not a call of its own")
}

// The index keeps the newest max calls: at the rebuild, which reads only
// the window of the newest max, and live, where each call evicts the
// oldest.
func TestIndexEvictsTheOldest(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	var made []string
	for i := range 5 {
		made = append(made, indexCall(t, s, indexAcme, "echo", fmt.Sprintf(`{"text":"call-%d"}`, i), "").CallId)
	}
	x := runIndex(t, s, 3)
	page, _, matched := x.Query(Query{})
	require.Equal(t, []string{made[4], made[3], made[2]}, ids(page))
	require.Equal(t, 3, matched)
	for _, id := range made[:2] {
		_, ok := x.Get(id)
		require.False(t, ok)
	}
	for _, e := range page {
		require.Equal(t, audit.OutcomeOK, e.Outcome, "results of the window are read")
	}

	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	for i := 5; i < 7; i++ {
		id := indexCall(t, s, indexAcme, "echo", fmt.Sprintf(`{"text":"call-%d"}`, i), "").CallId
		made = append(made, id)
		nextUpdate(t, ch, id, audit.OutcomeOK)
	}
	page, _, _ = x.Query(Query{})
	require.Equal(t, []string{made[6], made[5], made[4]}, ids(page))
	require.Equal(t, 3, x.Stats().Entries)
	page, _, _ = x.Query(Query{Text: "call-2"})
	require.Empty(t, page, "an evicted call's text is gone")
	page, _, _ = x.Query(Query{Text: "call-5"})
	require.Equal(t, []string{made[5]}, ids(page))
}

// synthetic is call k of a synthetic index (no JetStream): ids, tools,
// tenants and texts that the ring tests check against.
func synthetic(k int) (Entry, []byte) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Second)
	e := Entry{ID: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String(), Seq: uint64(2*k + 1), Time: at,
		Tenant: fmt.Sprintf("t%d", k%3), Tool: fmt.Sprintf("tool%d", k%7), Session: fmt.Sprintf("s%d", k), Outcome: audit.OutcomeOK,
		Worker: "w"}
	return e, fmt.Appendf(nil, `{"n":"k%d-"}`, k)
}

// The ring keeps the newest max calls through many evictions: every kept
// call is found by id, by text and by its filters, none evicted is, pages
// by cursor list each kept call once, and the interned strings and text
// slabs of evicted calls are released.
func TestIndexRingUnderChurn(t *testing.T) {
	t.Parallel()
	const max, total = 1000, 25_000
	x := mustNew(t, Config{Max: max})
	var made []Entry
	for k := range total {
		e, args := synthetic(k)
		require.True(t, x.add(e, args, []byte("result of "+e.ID), false))
		made = append(made, e)
		if k%5 == 0 { // some results arrive later, moving their text
			id, err := ulid.ParseStrict(e.ID)
			require.NoError(t, err)
			require.True(t, x.setOutcome((*[16]byte)(&id), outcomeUpdate{outcome: audit.OutcomeError, errType: "TIMEOUT"}, []byte("late")))
		}
	}
	e, args := synthetic(total - 1)
	require.False(t, x.add(e, args, nil, false), "a sequence already indexed")
	require.Equal(t, max, x.Stats().Entries)
	for k, e := range made {
		got, ok := x.Get(e.ID)
		require.Equal(t, k >= total-max, ok, "call %d", k)
		if ok {
			require.Equal(t, e.Seq, got.Seq)
			require.Equal(t, e.Tool, got.Tool)
			require.True(t, got.Time.Equal(e.Time))
		}
	}
	page, _, _ := x.Query(Query{Text: fmt.Sprintf(`"k%d-"`, total-max)})
	require.Len(t, page, 1, "the oldest kept call")
	page, _, _ = x.Query(Query{Text: fmt.Sprintf(`"k%d-"`, total-max-1)})
	require.Empty(t, page, "the newest evicted call")
	page, _, _ = x.Query(Query{Text: "late"})
	require.Len(t, page, 50)
	page, _, _ = x.Query(Query{Session: made[0].Session})
	require.Empty(t, page)
	require.Less(t, len(x.syms.ids), max+20, "the symbols of evicted calls are released")
	require.LessOrEqual(t, x.arena.bytes(), int64(3*slabSize), "the slabs of evicted calls are freed")

	tool3 := 0
	for _, e := range made[total-max:] {
		if e.Tool == "tool3" {
			tool3++
		}
	}
	seen := map[string]bool{}
	for before, pages := uint64(0), 0; ; pages++ {
		page, next, matched := x.Query(Query{Tool: "tool3", Limit: 37, Before: before})
		for _, e := range page {
			require.Equal(t, "tool3", e.Tool)
			require.False(t, seen[e.ID])
			seen[e.ID] = true
			require.True(t, before == 0 || e.Seq < before)
		}
		if pages == 0 {
			require.Equal(t, tool3, matched)
		}
		if next == 0 {
			break
		}
		before = next
	}
	require.Len(t, seen, tool3)

	_, _, matched := x.Query(Query{Outcome: audit.OutcomeError})
	require.Equal(t, max/5, matched)
	_, _, matched = x.Query(Query{Since: made[total-10].Time})
	require.Equal(t, 10, matched)
}

// Counting matches stops at MatchedCap; a limit past MaxQueryLimit is
// MaxQueryLimit.
func TestIndexQueryCapsCountAndLimit(t *testing.T) {
	t.Parallel()
	x := mustNew(t, Config{})
	for k := range MatchedCap + 100 {
		e, args := synthetic(k)
		e.Tenant = "one"
		require.True(t, x.add(e, args, nil, false))
	}
	page, next, matched := x.Query(Query{Tenant: "one", Limit: 10 * MaxQueryLimit})
	require.Len(t, page, MaxQueryLimit)
	require.Equal(t, MatchedCap, matched)
	require.Equal(t, page[len(page)-1].Seq, next)
	_, _, matched = x.Query(Query{})
	require.Equal(t, MatchedCap+100, matched, "exact without filters")
	page, _, _ = x.Query(Query{Tenant: "one", Limit: -1})
	require.Len(t, page, DefaultQueryLimit)
}

// Subscriptions are capped, and a subscriber that does not read never
// holds the feeder up: its updates are dropped and counted.
func TestIndexSubscribersAreCappedAndNeverBlock(t *testing.T) {
	t.Parallel()
	x := mustNew(t, Config{})
	var cancels []func()
	for range MaxSubscribers {
		_, cancel, err := x.Subscribe()
		require.NoError(t, err)
		cancels = append(cancels, cancel)
	}
	_, _, err := x.Subscribe()
	require.ErrorIs(t, err, ErrTooManySubscribers)
	for _, c := range cancels[1:] {
		c()
	}
	cancels[0]() // twice is harmless
	cancels[0]()
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	for k := range SubscriberBuffer + 10 {
		e, _ := synthetic(k)
		x.publish(e)
	}
	require.Len(t, ch, SubscriberBuffer)
	require.Equal(t, uint64(10), x.Stats().Dropped)
	x.closeSubscribers()
	cancel()
	n := 0
	for range ch {
		n++
	}
	require.Equal(t, SubscriberBuffer, n, "the updates sent are read, then the channel is closed")
}

// Search text keeps the arguments' head and the result's, lowercased;
// texts and durations survive their compact forms.
func TestIndexSearchTextAndDurations(t *testing.T) {
	t.Parallel()
	args := []byte(`{"q":"ÄBC` + fmt.Sprintf("%0300d", 7) + `"}`)
	text := compose(nil, lower(nil, args, searchTextMax), lower(nil, []byte("Result\x00Text"), searchTextMax))
	require.LessOrEqual(t, len(text), searchTextMax)
	require.Contains(t, string(text), `{"q":"äbc000`)
	require.Contains(t, string(text), "\x00result text")
	only := compose(nil, lower(nil, args, searchTextMax), nil)
	require.Len(t, only, searchTextMax, "all for the arguments while there is no result")
	for _, d := range []time.Duration{0, time.Microsecond, 1500 * time.Millisecond, 2 * time.Hour, 20 * 24 * time.Hour} {
		require.Equal(t, d, decodeDuration(encodeDuration(d)), "%v", d)
	}
	require.Equal(t, time.Duration(0), decodeDuration(encodeDuration(-time.Second)))
	require.Equal(t, time.Duration(1<<31-1)*time.Millisecond, decodeDuration(encodeDuration(100*24*time.Hour)), "saturated")
}
