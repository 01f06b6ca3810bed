package intents_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

func intent(id, typ, payload string) *toolwirev1.Intent {
	return &toolwirev1.Intent{Id: id, Type: typ, PayloadJson: payload}
}

// declared is the response of callID with intents in from a tool that
// declares every type in carries.
func declared(callID string, in []*toolwirev1.Intent) intents.Response {
	spec := &toolwirev1.ToolSpec{Name: "t"}
	for _, it := range in {
		spec.Intents = append(spec.Intents, it.GetType())
	}
	return intents.Response{CallID: callID, Intents: in, Spec: spec}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	spec := &toolwirev1.ToolSpec{Name: "t", Intents: []string{intents.SetState, intents.Notify, intents.EndSession, "acme.reindex"}}
	ok := []*toolwirev1.Intent{
		intent("i1", intents.SetState, `{"key":"k","value":{"a":[1,2]}}`),
		intent("i2", intents.Notify, `{"message":"hi","level":"warning"}`),
		intent("i3", intents.EndSession, ``),
		intent("i4", "acme.reindex", `{"index":"docs"}`),
	}
	if err := intents.Check(spec, ok); err != nil {
		t.Fatalf("valid intents refused: %v", err)
	}
	cases := []struct {
		name string
		in   *toolwirev1.Intent
		want string
	}{
		{"Undeclared", intent("x", intents.InjectContext, `{"text":"t"}`), "not declared"},
		{"UndeclaredCustom", intent("x", "acme.other", `{}`), "not declared"},
		{"NoID", intent("", intents.Notify, `{"message":"m"}`), "no id"},
		{"RepeatedID", intent("i1", intents.Notify, `{"message":"m"}`), "repeated"},
		{"NotObject", intent("x", "acme.reindex", `[1]`), "not a JSON object"},
		{"NotJSON", intent("x", "acme.reindex", `{`), "not a JSON object"},
		{"MissingField", intent("x", intents.SetState, `{"key":"k"}`), "payload invalid"},
		{"WrongType", intent("x", intents.Notify, `{"message":5}`), "payload/message"},
		{"BadEnum", intent("x", intents.Notify, `{"message":"m","level":"loud"}`), "payload/level"},
		{"Extra", intent("x", intents.EndSession, `{"reason":"r","force":true}`), "payload invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := []*toolwirev1.Intent{ok[0], c.in}
			err := intents.Check(spec, in)
			if !errors.Is(err, intents.ErrViolation) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a violation containing %q, got %v", c.want, err)
			}
		})
	}
	many := make([]*toolwirev1.Intent, intents.MaxPerResponse+1)
	for i := range many {
		many[i] = intent(fmt.Sprint(i), intents.EndSession, "")
	}
	if err := intents.Check(spec, many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("too many intents: %v", err)
	}
}

func TestCheckSpec(t *testing.T) {
	t.Parallel()
	good := &toolwirev1.ToolSpec{Intents: []string{intents.SetState, "acme.reindex", "acme.search.refresh"}}
	if err := intents.CheckSpec(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"SET_STATES", "reindex", "Acme.reindex", "acme.", ".x", "acme..x"} {
		if err := intents.CheckSpec(&toolwirev1.ToolSpec{Intents: []string{bad}}); err == nil {
			t.Errorf("type %q accepted", bad)
		}
	}
}

func newApplier(t *testing.T) *intents.Applier {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	return intents.NewApplier(env.Bus.Sessions, intents.ApplierConfig{})
}

func TestApplyBuiltins(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	in := []*toolwirev1.Intent{
		intent("i1", intents.SetState, `{"key":"cart","value":{"items":[1, 2]}}`),
		intent("i2", intents.SetState, `{"key":"tmp","value":1}`),
		intent("i3", intents.SetState, `{"key":"tmp","value":null}`),
		intent("i4", intents.SetPendingMessage, `{"message":"Your order is placed."}`),
		intent("i5", intents.SuppressAudio, ``),
		intent("i6", intents.SuppressTranscript, `{"suppress":false}`),
		intent("i7", intents.Notify, `{"message":"order placed"}`),
		intent("i8", intents.EndSession, `{"reason":"done"}`),
	}
	out, err := a.Apply(t.Context(), "acme", "s-1", declared("call1", in))
	s := out.Session
	if err != nil || out.Applied != len(in) || out.Skipped != 0 {
		t.Fatalf("apply: %v %+v", err, out)
	}
	got, err := a.Get(t.Context(), "acme", "s-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*toolwirev1.Session{s, got} {
		if s.StateJson["cart"] != `{"items":[1,2]}` || len(s.StateJson) != 1 || s.PendingMessage != "Your order is placed." ||
			!s.SuppressAudio || s.SuppressTranscript || !s.Ended || s.EndReason != "done" || len(s.Log) != len(in) || s.Revision != 1 {
			t.Fatalf("session: %v", s)
		}
	}
	// Tenants and odd session ids never share a key.
	other, err := a.Get(t.Context(), "other", "s-1")
	if err != nil || other.Revision != 0 || len(other.StateJson) != 0 {
		t.Fatalf("another tenant sees the session: %v %v", other, err)
	}
	if intents.SessionKey("t", "a.b") == intents.SessionKey("t", "a_b") || strings.Count(intents.SessionKey("t", "x.>*"), ".") != 1 {
		t.Fatal("session keys collide or leak tokens")
	}
	// Session ids that are not plain tokens round-trip through the bucket.
	for _, id := range []string{"user:42", "a@b", "conv/1", "x.y", "~tilde", strings.Repeat("long", 100)} {
		if out, err := a.Apply(t.Context(), "acme", id, declared("c-"+id[:3], []*toolwirev1.Intent{
			intent("i1", intents.SetState, `{"key":"k","value":1}`)})); err != nil || out.Applied != 1 {
			t.Fatalf("apply to session %q: %v", id, err)
		}
		got, err := a.Get(t.Context(), "acme", id)
		if err != nil || got.StateJson["k"] != "1" || got.Session != id {
			t.Fatalf("session %q: %v %v", id, got, err)
		}
	}
}

// Apply screens each intent against the catalog and the tool's spec
// version: the valid ones apply, each other one is refused with its
// reason, recorded in the session's log once, and changes nothing else.
func TestApplyRefusesWhatTheSpecDoesNotAllow(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	spec := &toolwirev1.ToolSpec{Name: "t", Intents: []string{intents.SetState}}
	in := []*toolwirev1.Intent{
		intent("i1", intents.SetState, `{"key":"x","value":1}`),
		intent("i2", intents.EndSession, ``),
		intent("i3", intents.SetState, `{"key":5}`),
		intent("i4", "SET_STATES", `{}`),
		intent("", intents.SetState, `{"key":"y","value":1}`),
		intent("i1", intents.SetState, `{"key":"z","value":1}`),
	}
	r := intents.Response{CallID: "c1", Intents: in, Spec: spec}
	want := map[int]string{1: "not declared by the tool (declared: SET_STATE)", 2: "payload invalid", 3: "not in the intent catalog",
		4: "no id", 5: `id "i1" repeated`}
	for round := range 2 {
		out, err := a.Apply(t.Context(), "t", "s", r)
		if err != nil || out.Applied != 1-round || out.Skipped != round || len(out.Refused) != len(want) {
			t.Fatalf("round %d: %v %+v", round, err, out)
		}
		for _, rf := range out.Refused {
			if !strings.Contains(rf.Reason, want[rf.Index]) {
				t.Errorf("intent %d refused for %q, want %q", rf.Index, rf.Reason, want[rf.Index])
			}
		}
		s := out.Session
		if len(s.StateJson) != 1 || s.StateJson["x"] != "1" || s.Ended || s.Revision != 1 || len(s.Log) != 2 || len(s.Applied) != 1 {
			t.Fatalf("round %d: session %v", round, s)
		}
		// One entry records the call's refusals: how many, the first
		// reasons, a digest and no payload.
		sum := s.Log[1]
		if s.Log[0].Refused != "" || sum.IntentId != intents.RefusedEntryID || sum.CallId != "c1" ||
			!strings.HasPrefix(sum.Refused, `5 intents refused; #2 (END_SESSION, id "i2"): type `+want[1]) ||
			!strings.HasSuffix(sum.Refused, "and 1 more") || !strings.HasPrefix(sum.PayloadJson, `{"count":5,"sha256":"`) {
			t.Fatalf("refusal summary: %v", sum)
		}
		for i := 1; i <= 4; i++ {
			if !strings.Contains(sum.Refused, want[i]) {
				t.Errorf("the summary does not say %q", want[i])
			}
		}
	}
	// A spec version that cannot be found refuses every intent.
	out, err := a.Apply(t.Context(), "t", "s", intents.Response{CallID: "c2", Intents: in[:1], NoSpec: "spec version v9 is unknown"})
	if err != nil || out.Applied != 0 || len(out.Refused) != 1 || out.Recorded != 1 || out.Session.StateJson["x"] != "1" || len(out.Session.Log) != 3 ||
		out.Session.Log[2].Refused != `1 intent refused; #1 (SET_STATE, id "i1"): spec version v9 is unknown` {
		t.Fatalf("unknown spec: %v %+v", err, out)
	}
}

// TestApplyTwice: the same response delivered twice applies each intent
// once.
func TestApplyTwice(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	in := []*toolwirev1.Intent{
		intent("i1", "acme.counter.bump", `{}`),
		intent("i2", intents.SetState, `{"key":"k","value":"v"}`),
	}
	if out, err := a.Apply(t.Context(), "t", "s", declared("c1", in)); err != nil || out.Applied != 2 {
		t.Fatalf("first: %v %+v", err, out)
	}
	out, err := a.Apply(t.Context(), "t", "s", declared("c1", in))
	s := out.Session
	if err != nil || out.Applied != 0 || out.Skipped != 2 {
		t.Fatalf("second: %v %+v", err, out)
	}
	if len(s.Log) != 2 || s.Revision != 1 {
		t.Fatalf("the repeat changed the session: %v", s)
	}
	// A partial repeat (one new intent) applies only the new one.
	in = append(in, intent("i3", intents.Notify, `{"message":"m"}`))
	if out, err = a.Apply(t.Context(), "t", "s", declared("c1", in)); err != nil || out.Applied != 1 || out.Skipped != 2 || len(out.Session.Log) != 3 {
		t.Fatalf("partial repeat: %v %+v", err, out)
	}
}

// TestConcurrentAppliers: two appliers (separate connections) updating one
// session at once lose no update.
func TestConcurrentAppliers(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	appliers := []*intents.Applier{
		intents.NewApplier(env.Bus.Sessions, intents.ApplierConfig{}),
		intents.NewApplier(env.Open(t, "second-applier").Sessions, intents.ApplierConfig{}),
	}
	const perApplier = 60
	var wg sync.WaitGroup
	errs := make(chan error, 2*perApplier)
	for n, a := range appliers {
		wg.Go(func() {
			for i := range perApplier {
				call := fmt.Sprintf("a%d-c%d", n, i)
				out, err := a.Apply(t.Context(), "t", "shared", declared(call, []*toolwirev1.Intent{
					intent("i1", intents.SetState, fmt.Sprintf(`{"key":%q,"value":%d}`, call, i))}))
				if err == nil && out.Applied != 1 {
					err = fmt.Errorf("%s applied %d", call, out.Applied)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s, err := appliers[0].Get(t.Context(), "t", "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.StateJson) != 2*perApplier || s.Revision != 2*perApplier || len(s.Applied) != 2*perApplier {
		t.Fatalf("lost updates: %d keys, revision %d, %d applied", len(s.StateJson), s.Revision, len(s.Applied))
	}
}

func TestApplyBounds(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	a := intents.NewApplier(env.Bus.Sessions, intents.ApplierConfig{Remember: 3, MaxLog: 2})
	for i := range 5 {
		if _, err := a.Apply(t.Context(), "t", "s", declared(fmt.Sprint("c", i), []*toolwirev1.Intent{intent("i1", "acme.x", "")})); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := a.Get(t.Context(), "t", "s")
	if len(s.Applied) != 3 || len(s.Log) != 2 || s.Applied[2] != "c4/i1" || s.Log[1].CallId != "c4" {
		t.Fatalf("bounds: applied %v, log %d", s.Applied, len(s.Log))
	}
	if _, err := a.Apply(t.Context(), "t", "", declared("c", nil)); err == nil {
		t.Fatal("apply without a session")
	}
	// A tenant that is no valid tenant name is refused, never mapped to a
	// key (a.b would share tenant a_b's sessions).
	if _, err := a.Apply(t.Context(), "a.b", "s", declared("c", nil)); err == nil || !strings.Contains(err.Error(), "tenant") {
		t.Fatalf("apply for tenant a.b: %v", err)
	}
	if _, err := a.Get(t.Context(), "a.b", "s"); err == nil || !strings.Contains(err.Error(), "tenant") {
		t.Fatalf("get for tenant a.b: %v", err)
	}
}

// A session stays one KV value under the payload limit: the log is trimmed
// by bytes, and state past MaxStateBytes is refused.
func TestSessionSizeBounds(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	big := strings.Repeat("x", 60<<10)
	for i := range 20 {
		if _, err := a.Apply(t.Context(), "t", "s", declared(fmt.Sprint("c", i), []*toolwirev1.Intent{
			intent("i1", intents.InjectContext, fmt.Sprintf(`{"text":%q}`, big))})); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	s, err := a.Get(t.Context(), "t", "s")
	if err != nil || len(s.Log) == 0 || len(s.Log) > intents.MaxLogBytes/(60<<10) || s.Log[len(s.Log)-1].CallId != "c19" {
		t.Fatalf("log of %d entries: %v", len(s.Log), err)
	}
	var err2 error
	for i := 0; i < 20 && err2 == nil; i++ {
		_, err2 = a.Apply(t.Context(), "t", "s", declared(fmt.Sprint("k", i), []*toolwirev1.Intent{
			intent("i1", intents.SetState, fmt.Sprintf(`{"key":"k%d","value":%q}`, i, big))}))
	}
	if !errors.Is(err2, intents.ErrSessionFull) {
		t.Fatalf("state growth: %v", err2)
	}
}

// A flood of refused intents (one forged result with thousands) neither
// pushes earlier calls out of the session's memory of applied intents nor
// fills its log: the refusals of one call are one bounded log entry, with
// no payload, and no key in Applied; an earlier call repeated applies
// nothing.
func TestRefusalFloodKeepsTheSessionsMemory(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	early := declared("early", []*toolwirev1.Intent{intent("i1", intents.SetState, `{"key":"k","value":1}`)})
	if out, err := a.Apply(t.Context(), "t", "s", early); err != nil || out.Applied != 1 {
		t.Fatalf("early: %v %+v", err, out)
	}
	junk := make([]*toolwirev1.Intent, 5000)
	secret := strings.Repeat("p", 60<<10)
	for i := range junk {
		junk[i] = intent(fmt.Sprint("j", i), "junk", `{}`)
	}
	junk[1] = intent(strings.Repeat("i", 4000), strings.Repeat("T", 4000), fmt.Sprintf(`{"x":%q}`, secret))
	flood := intents.Response{CallID: "flood", Intents: junk} // a nil spec declares none
	for round := range 2 {
		out, err := a.Apply(t.Context(), "t", "s", flood)
		if err != nil || out.Applied != 0 || len(out.Refused) != len(junk) || out.Recorded != len(junk)*(1-round) {
			t.Fatalf("flood round %d: %v applied %d refused %d recorded %d", round, err, out.Applied, len(out.Refused), out.Recorded)
		}
	}
	s, err := a.Get(t.Context(), "t", "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Applied) != 1 || len(s.Log) != 2 || s.Revision != 2 {
		t.Fatalf("the flood took %d applied keys, %d log entries, revision %d", len(s.Applied), len(s.Log), s.Revision)
	}
	sum := s.Log[1]
	if sum.CallId != "flood" || !strings.Contains(sum.Refused, "5000 intents refused") || strings.Contains(sum.PayloadJson, "ppp") ||
		len(sum.Refused) > 2048 {
		t.Fatalf("refusal summary: %.300v", sum)
	}
	if n := proto.Size(s); n > 8<<10 {
		t.Fatalf("the session is %d bytes after the flood", n)
	}
	out, err := a.Apply(t.Context(), "t", "s", early)
	if err != nil || out.Applied != 0 || out.Skipped != 1 {
		t.Fatalf("the early call applied again after the flood: %v %+v", err, out)
	}
}

// Refused intents carry fields nothing checked (ids, types, reasons up to
// the cut); however many calls are refused, the session's log is bounded
// by its encoded size, so the session stays one KV value.
func TestRefusalsKeepTheLogBoundedInBytes(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	long := strings.Repeat("x", 4000)
	for i := range 300 {
		in := []*toolwirev1.Intent{intent(long+fmt.Sprint(i), "A"+long, `{}`), intent("i2", "B"+long, `{}`)}
		if _, err := a.Apply(t.Context(), "t", "s", intents.Response{CallID: fmt.Sprint("c", i), Intents: in}); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	s, err := a.Get(t.Context(), "t", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(s); n > intents.MaxLogBytes+4<<10 || len(s.Applied) != 0 || s.Log[len(s.Log)-1].CallId != "c299" {
		t.Fatalf("session of %d bytes, %d applied keys, %d log entries", n, len(s.Applied), len(s.Log))
	}
}
