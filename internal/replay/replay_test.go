package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/replay"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type greetIn struct {
	Name string `json:"name"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
	Length   int    `json:"length"`
}

func greet(word string) *tool.Tool {
	return tool.Must(tool.New("greet", func(_ context.Context, in greetIn) (greetOut, error) {
		g := word + ", " + in.Name
		return greetOut{Greeting: g, Length: len(g)}, nil
	}, tool.WithDescription("Greets with "+word+".")))
}

// TestReplayShowsTheDiff: a newer version of a tool that changes its
// output, served by a shadow pool, replays a recorded call; the diff names
// what changed, and the original result, the live version and the audit
// stay as they were.
func TestReplayShowsTheDiff(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{greet("hello")}})
	ctx := t.Context()
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"name":"Ada"}`}, 30*time.Second)
	if err != nil || !r.Response.GetOk() {
		t.Fatalf("call: %v %v", r, err)
	}
	live, _ := s.Registry.Get("greet")
	v1 := live.Spec.Version

	// The shadow pool serves version 2.
	v2tool := greet("hi")
	nat, err := native.New(v2tool)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(s.Env.Open(t, "shadow"), worker.Config{Shadow: true,
		Pools:     []worker.Pool{{PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat},
		Specs:     nat.Specs()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	})
	ent, err := s.Registry.GetVersion(ctx, "greet", "")
	if err != nil || ent.Spec.Version != v1 {
		t.Fatalf("the shadow pool moved the live version: %v %v", ent, err)
	}
	v2 := mustVersion(t, v2tool)
	if v2 == v1 {
		t.Fatal("the new version has the old hash")
	}

	src, err := audit.Open(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	rp, err := replay.New(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	var pairs []*replay.Pair
	if _, err := src.Run(ctx, audit.Filter{CallID: r.CallId}, audit.Options{}, func(rec *audit.Record) error {
		pairs = append(pairs, rp.Replay(ctx, rec, replay.Options{Version: v2, Wait: 20 * time.Second}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 {
		t.Fatalf("pairs: %v", pairs)
	}
	p := pairs[0]
	if p.Error != "" || p.Equal || p.OriginalVersion != v1 || p.ReplayVersion != v2 || p.ReplayCallID == r.CallId {
		t.Fatalf("pair: %+v", p)
	}
	got := map[string]string{}
	for _, c := range p.Changes {
		got[c.Field] = string(c.Original) + " -> " + string(c.Replay)
	}
	want := map[string]string{
		"structured.greeting": `"hello, Ada" -> "hi, Ada"`,
		"structured.length":   `10 -> 7`,
	}
	for f, w := range want {
		if got[f] != w {
			t.Errorf("change %s = %q, want %q (all: %v)", f, got[f], w, got)
		}
	}
	if _, ok := got["content[0]"]; !ok {
		t.Errorf("the text block change is not reported: %v", got)
	}
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"equal":false`) {
		t.Errorf("pair JSON: %s", b)
	}

	// The original result is untouched and the audit still sees one call.
	again, err := s.Dispatcher.GetResult(ctx, identity.Default, r.CallId, 0)
	if err != nil || again.Response.GetStructuredJson() != r.Response.GetStructuredJson() {
		t.Fatalf("original result changed: %v %v", again, err)
	}
	sum, err := src.Run(ctx, audit.Filter{}, audit.Options{}, func(*audit.Record) error { return nil })
	if err != nil || sum.Records != 1 || !sum.OK() {
		t.Fatalf("audit after the replay: %+v %v", sum, err)
	}

	// A version no shadow pool serves is reported, not waited for forever.
	if _, err := src.Run(ctx, audit.Filter{CallID: r.CallId}, audit.Options{}, func(rec *audit.Record) error {
		p := rp.Replay(ctx, rec, replay.Options{Version: "nope"})
		if !strings.Contains(p.Error, "no version nope") {
			t.Errorf("unknown version: %+v", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func mustVersion(t *testing.T, tl *tool.Tool) string {
	t.Helper()
	nat, err := native.New(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nat.Specs() {
		return registryVersion(s)
	}
	t.Fatal("no spec")
	return ""
}

// Without a shadow pool a replay fails at once, naming the fix, instead
// of waiting its full Wait for each call.
func TestReplayWithoutShadowPoolFailsFast(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{greet("hello")}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"name":"Ada"}`}, 20*time.Second)
	if err != nil || !r.Response.GetOk() {
		t.Fatalf("call: %v %v", r, err)
	}
	rp, err := replay.New(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.CheckShadowPools(ctx); !errors.Is(err, replay.ErrNoShadowPool) {
		t.Fatalf("CheckShadowPools = %v, want ErrNoShadowPool", err)
	}
	src, err := audit.Open(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	var pairs []*replay.Pair
	if _, err := src.Run(ctx, audit.Filter{CallID: r.CallId}, audit.Options{}, func(rec *audit.Record) error {
		// A Wait longer than the test's deadline: waiting would fail it.
		pairs = append(pairs, rp.Replay(ctx, rec, replay.Options{Wait: time.Hour}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || !strings.Contains(pairs[0].Error, "no shadow pool serves greet") {
		t.Fatalf("pairs: %+v", *pairs[0])
	}
}

// A replay's answer is the result the stream stored. A shadow worker's
// JetStream publish reaches the replay's core subscription even when the
// stream refuses it; that message must not become the replay's answer
// (issue 12: replay took any core message). Here a stand-in shadow worker
// first publishes a result the stream refuses, then stores another: the
// replay reports the stored one.
func TestReplayAnswersOnlyTheStoredResult(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{greet("hello")}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"name":"Ada"}`}, 20*time.Second)
	if err != nil || !r.Response.GetOk() {
		t.Fatalf("call: %v %v", r, err)
	}
	b := s.Env.Bus
	live, _ := s.Registry.Get("greet")
	shadow := b.Subjects.Shadow(live.Spec.Executor, "default", live.Spec.Provider, "greet")
	cons, err := b.JS.CreateConsumer(ctx, b.Config.CallsStream(), jetstream.ConsumerConfig{Durable: "stand-in-shadow",
		FilterSubject: shadow, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			answered <- err
			return
		}
		call := &toolwirev1.ToolCall{}
		if err := proto.Unmarshal(m.Data(), call); err != nil {
			answered <- err
			return
		}
		subject := b.Subjects.Result("default", bus.ReplayDispatcher, call.CallId)
		refused, _ := proto.Marshal(&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Ok: true,
			StructuredJson: `{"greeting":"never stored","length":12}`})
		if _, err := b.JS.Publish(ctx, subject, refused, jetstream.WithExpectLastSequencePerSubject(999)); err == nil {
			answered <- errors.New("the stream stored a publish it must refuse")
			return
		}
		stored, _ := proto.Marshal(&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Ok: true,
			StructuredJson: `{"greeting":"stored","length":6}`})
		_, err = b.JS.Publish(ctx, subject, stored)
		answered <- errors.Join(err, m.Ack())
	}()

	rp, err := replay.New(ctx, b.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	src, err := audit.Open(ctx, b.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	var pairs []*replay.Pair
	if _, err := src.Run(ctx, audit.Filter{CallID: r.CallId}, audit.Options{}, func(rec *audit.Record) error {
		pairs = append(pairs, rp.Replay(ctx, rec, replay.Options{Wait: 30 * time.Second}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 || pairs[0].Error != "" {
		t.Fatalf("pairs: %+v", pairs)
	}
	var got string
	for _, c := range pairs[0].Changes {
		if c.Field == "structured.greeting" {
			got = string(c.Replay)
		}
	}
	if got != `"stored"` {
		t.Fatalf("the replay answered %s, not the stored result (changes: %+v)", got, pairs[0].Changes)
	}
}
