package callindex

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const denySigninPolicy = `
tenant:
  default: allow
  rules:
    - {id: no-signin, effect: deny, tools: [signin], reason: sign-ins are for people}
`

// refuseCall makes a call the policy refuses and returns its id.
func refuseCall(t *testing.T, s *dispatchtest.Stack, id identity.Identity) string {
	t.Helper()
	r := indexCall(t, s, id, "signin", `{"user":"ann","token":"tok-never-indexed"}`, "")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetResponse().GetError().GetType())
	return r.CallId
}

// Calls refused at admission (their REJECTED events) are indexed, before
// the index starts and live, in a ring of their own: with their reason,
// searchable, listed with the admitted calls newest first and paged
// through with a two-sequence cursor; a REJECTED event no dispatcher
// signed is no refusal.
func TestIndexKeepsRefusedCalls(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	s.ApplyPolicy(t, denySigninPolicy)
	ok1 := indexCall(t, s, indexAcme, "echo", `{"text":"one"}`, "").CallId
	before := refuseCall(t, s, indexAcme)
	x := runIndex(t, s, 100)
	require.Equal(t, 1, x.Stats().Refused, "the refusal stored before the index started")
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()

	ok2 := indexCall(t, s, indexAcme, "echo", `{"text":"two"}`, "").CallId
	live := refuseCall(t, s, indexGlobex)
	e := nextUpdate(t, ch, live, audit.OutcomeRejected)
	require.True(t, e.Refused())
	require.Equal(t, "globex", e.Tenant)
	require.Equal(t, "crawler", e.Agent)
	require.Equal(t, "signin", e.Tool)
	require.Equal(t, "PERMISSION_DENIED", e.ErrorType)
	require.Contains(t, e.Reason, "sign-ins are for people")

	// A forged rejection: on the events subject, signed by no dispatcher.
	forged := ulid.Make().String()
	data, err := proto.Marshal(&toolwirev1.CallEvent{CallId: forged, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, Tool: "echo",
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot"}, Error: &toolwirev1.ToolError{Message: "forged"}})
	require.NoError(t, err)
	_, err = s.Env.Bus.JS.Publish(t.Context(), s.Env.Bus.Subjects.Event("acme", "d9", forged), data)
	require.NoError(t, err)
	after := refuseCall(t, s, indexAcme) // indexed after the forged one
	nextUpdate(t, ch, after, audit.OutcomeRejected)
	_, found := x.Get(forged)
	require.False(t, found, "a rejection no dispatcher signed")

	page, next, matched := x.List(Query{}, Cursor{})
	require.Equal(t, []string{after, live, ok2, before, ok1}, ids(page), "newest first, refusals among the calls")
	require.Equal(t, 5, matched)
	require.True(t, next.IsZero())
	var paged []string
	for c, n := (Cursor{}), 0; n < 10; n++ {
		page, c, _ = x.List(Query{Limit: 2}, c)
		paged = append(paged, ids(page)...)
		if c.IsZero() {
			break
		}
	}
	require.Equal(t, []string{after, live, ok2, before, ok1}, paged, "two at a time")

	page, _, _ = x.List(Query{Outcome: audit.OutcomeRejected, Tenant: "acme"}, Cursor{})
	require.Equal(t, []string{after, before}, ids(page))
	page, _, _ = x.List(Query{Outcome: audit.OutcomeOK}, Cursor{})
	require.Equal(t, []string{ok2, ok1}, ids(page))
	page, _, _ = x.List(Query{Text: "no-signin"}, Cursor{})
	require.Len(t, page, 3, "the rule is searched")
	page, _, _ = x.List(Query{Text: "tok-never"}, Cursor{})
	require.Empty(t, page, "a refusal has no arguments indexed")
	page, _, _ = x.Query(Query{})
	require.Equal(t, []string{ok2, ok1}, ids(page), "Query reads the admitted calls only")
}

// The feed tells a REJECTED event from the others by its type field
// alone.
func TestIsRejection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ev   *toolwirev1.CallEvent
		want bool
	}{
		{&toolwirev1.CallEvent{CallId: "x", Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, Message: "m"}, true},
		{&toolwirev1.CallEvent{CallId: "x", Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED}, false},
		{&toolwirev1.CallEvent{CallId: "x"}, false},
	} {
		data, err := proto.Marshal(c.ev)
		require.NoError(t, err)
		require.Equal(t, c.want, isRejection(data), "%v", c.ev)
	}
	require.False(t, isRejection([]byte{0xff, 0xff, 0xff}), "garbage")
	require.Equal(t, 256, len(cutReason(string(make([]byte, 300)))))
	long := ""
	for range 200 {
		long += "€"
	}
	require.LessOrEqual(t, len(cutReason(long)), MaxReasonBytes)
	require.Equal(t, 255, len(cutReason(long)), "cut at a rune's start")
}

// A refused call's names are whatever its caller sent: the ring keeps
// them cut, so that refusals with huge names keep its memory small.
func TestRefusalsRingCutsNames(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	x := runIndex(t, s, 100)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	huge := strings.Repeat("n", 200<<10)
	var last string
	var before int64
	for i := range 41 {
		if i == 1 { // the ring is allocated at its first refusal
			nextUpdate(t, ch, last, audit.OutcomeRejected)
			before = x.Stats().Bytes
		}
		last = ulid.Make().String()
		data, err := proto.Marshal(&toolwirev1.CallEvent{CallId: last, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, Tool: huge,
			Caller: &toolwirev1.Caller{Tenant: "acme", Agent: huge, Session: huge}, Error: &toolwirev1.ToolError{Message: huge}})
		require.NoError(t, err)
		m := s.Env.Bus.Signer.SignedMsg(s.Env.Bus.Subjects.Event("acme", "d1", last), signing.KindEvent, last, 0, data, nil)
		_, err = s.Env.Bus.JS.PublishMsg(t.Context(), m)
		require.NoError(t, err)
	}
	e := nextUpdate(t, ch, last, audit.OutcomeRejected)
	require.Equal(t, 41, x.Stats().Refused)
	require.LessOrEqual(t, len(e.Tool), MaxReasonBytes)
	require.LessOrEqual(t, len(e.Session), MaxReasonBytes)
	require.LessOrEqual(t, len(e.Agent), MaxReasonBytes)
	require.Less(t, x.Stats().Bytes-before, int64(256<<10), "40 refusals")
}

// A call both admitted and refused (an overload refusal after a publish
// that reached the stream) is listed once, as the admitted call.
func TestListShowsACallAdmittedAndRefusedOnce(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	s.ApplyPolicy(t, denySigninPolicy)
	x := runIndex(t, s, 100)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	ok := indexCall(t, s, indexAcme, "echo", `{"text":"one"}`, "").CallId
	data, err := proto.Marshal(&toolwirev1.CallEvent{CallId: ok, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, Tool: "echo",
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot"}, Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED}})
	require.NoError(t, err)
	_, err = s.Env.Bus.JS.PublishMsg(t.Context(), s.Env.Bus.Signer.SignedMsg(s.Env.Bus.Subjects.Event("acme", "d1", ok), signing.KindEvent, ok, 0, data, nil))
	require.NoError(t, err)
	later := refuseCall(t, s, indexAcme)
	nextUpdate(t, ch, later, audit.OutcomeRejected)
	require.Equal(t, 2, x.Stats().Refused, "both refusals are indexed")
	page, _, _ := x.List(Query{}, Cursor{})
	require.Equal(t, []string{later, ok}, ids(page))
	require.False(t, page[1].Refused())
}

// A run again reads the refusals from after the last event the feed
// read, not from the newest refusal: with rare refusals it does not read
// the events stream again.
func TestRefusalsRebuildResumesAfterLastEvent(t *testing.T) {
	t.Parallel()
	s := startIndexStack(t, nil)
	s.ApplyPolicy(t, denySigninPolicy)
	x := runIndex(t, s, 100)
	ch, cancel, err := x.Subscribe()
	require.NoError(t, err)
	defer cancel()
	refused := refuseCall(t, s, indexAcme)
	nextUpdate(t, ch, refused, audit.OutcomeRejected)
	for range 5 { // other events, after the refusal
		id := ulid.Make().String()
		data, err := proto.Marshal(&toolwirev1.CallEvent{CallId: id, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED})
		require.NoError(t, err)
		_, err = s.Env.Bus.JS.Publish(t.Context(), s.Env.Bus.Subjects.Event("acme", "d1", id), data)
		require.NoError(t, err)
	}
	info, err := s.Env.Bus.Events.Info(t.Context())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return x.eventsSeq.Load() >= info.State.LastSeq }, indexWait, 10*time.Millisecond, "the feed reads every event")
	require.GreaterOrEqual(t, info.State.LastSeq, x.refused.Stats().LastSeq+5, "events after the refusal")
	f := &feeder{x: x, streams: x.streams}
	cfg := f.refusalsFrom(max(info.State.FirstSeq, 1))
	require.Equal(t, jetstream.DeliverByStartSequencePolicy, cfg.DeliverPolicy)
	require.Greater(t, cfg.OptStartSeq, info.State.LastSeq, "from after the last event read")
}
