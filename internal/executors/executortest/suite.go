package executortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Bounds of the suite. Generous for loaded CI machines; a conforming
// executor is far inside them.
const (
	callTimeout = 30 * time.Second // any one Execute
	stopWithin  = 5 * time.Second  // Execute returns after its context ends
	goneWithin  = 5 * time.Second  // Running turns false after Execute returned
	startWithin = 15 * time.Second // Block's work is seen running
)

// EchoTexts are the arguments the Echo check sends; each must come back
// byte for byte.
var EchoTexts = []string{
	"hello",
	"héllo — 世界 🚀",
	"line one\nline two\ttabbed",
	`quotes "double" 'single' \backslash`,
	"$(id); rm -rf / && echo ${IFS}|cat * `uname` > /tmp/x",
	"-rf",
	strings.Repeat("long ", 2000),
}

// Run runs the conformance suite against s. Checks whose fixture s does
// not have are logged as not applicable.
func Run(t *testing.T, s Subject) {
	t.Helper()
	if s.Executor == nil {
		t.Fatal("executortest: Subject.Executor is nil")
	}
	if s.Tools[Block] != nil && s.Running == nil {
		t.Fatal("executortest: Subject.Running is required with a Block fixture")
	}
	r := &runner{s: s}
	checks := []struct {
		name string
		need Fixture
		run  func(t *testing.T)
	}{
		{"Echo", Echo, r.echo},
		{"Concurrent", Echo, r.concurrent},
		{"Structured", Structured, r.structured},
		{"Image", Image, r.image},
		{"Audio", Audio, r.audio},
		{"ResourceLink", ResourceLink, r.resourceLink},
		{"Resource", Resource, r.resource},
		{"BadArgs", Echo, r.badArgs},
		{"Timeout", Block, r.timeout},
		{"Cancel", Block, r.cancel},
		{"Progress", Progress, r.progress},
		{"Panic", Panic, r.panic},
		{"Big", Big, r.big},
		{"Intents", Intents, r.intents},
		{"Fail", Fail, r.fail},
	}
	for _, c := range checks {
		if s.Tools[c.need] == nil || (c.name == "BadArgs" && s.BadArgs == nil) || (c.name == "Fail" && len(s.Fail) == 0) {
			t.Logf("executortest: %s: not applicable (no %s fixture)", c.name, c.need)
			continue
		}
		t.Run(c.name, c.run)
	}
}

type runner struct {
	s Subject
	n atomic.Int64
}

type outcome struct {
	res *tool.Result
	err error
}

// start runs fixture f with args under ctx in a goroutine; the outcome
// arrives on the channel (a panic of Execute becomes an error).
func (r *runner) start(ctx context.Context, f Fixture, args string) <-chan outcome {
	spec := r.s.Tools[f]
	call := &toolwirev1.ToolCall{
		CallId:      fmt.Sprintf("exectest-%s-%d", f, r.n.Add(1)),
		Tool:        spec.GetName(),
		Arguments:   []byte(args),
		Attempt:     1,
		Executor:    spec.GetExecutor(),
		Caller:      &toolwirev1.Caller{Tenant: "default", Agent: "executortest", Session: "s1"},
		SpecVersion: spec.GetVersion(),
	}
	ctx = tool.WithCallInfo(ctx, tool.CallInfo{CallID: call.CallId, Tool: call.Tool, Attempt: 1, Caller: call.Caller})
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				o.err = fmt.Errorf("executortest: Execute panicked: %v", p)
			}
			done <- o
		}()
		o.res, o.err = r.s.Executor.Execute(ctx, &executors.Request{Call: call, Spec: proto.Clone(spec).(*toolwirev1.ToolSpec)})
	}()
	return done
}

// exec runs fixture f with args under ctx and fails the test if Execute
// does not return within callTimeout.
func (r *runner) exec(t *testing.T, ctx context.Context, f Fixture, args string) (*tool.Result, error) {
	t.Helper()
	select {
	case o := <-r.start(ctx, f, args):
		return o.res, o.err
	case <-time.After(callTimeout):
		t.Fatalf("executortest: %s did not return within %s", f, callTimeout)
		return nil, nil
	}
}

func (r *runner) ok(t *testing.T, f Fixture, args string) *tool.Result {
	t.Helper()
	res, err := r.exec(t, t.Context(), f, args)
	if err != nil {
		t.Fatalf("%s(%s): unexpected error: %v", f, clip(args), err)
	}
	if res == nil {
		t.Fatalf("%s(%s): nil result and nil error", f, clip(args))
	}
	return res
}

func (r *runner) fails(t *testing.T, ctx context.Context, f Fixture, args string, want toolwirev1.ErrorType) *tool.Error {
	t.Helper()
	res, err := r.exec(t, ctx, f, args)
	return failed(t, ctx, f, args, res, err, want)
}

func failed(t *testing.T, ctx context.Context, f Fixture, args string, res *tool.Result, err error, want toolwirev1.ErrorType) *tool.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s(%s): want %s, got a result: %v", f, clip(args), want, res)
	}
	te := tool.AsError(ctx, err)
	if te.Type != want {
		t.Fatalf("%s(%s): want %s, got %s (%v)", f, clip(args), want, te.Type, err)
	}
	if te.Message == "" {
		t.Errorf("%s: the %s error has no message", f, want)
	}
	return te
}

func (r *runner) expect(f Fixture, def toolwirev1.ErrorType) toolwirev1.ErrorType {
	if t, ok := r.s.Expect[f]; ok {
		return t
	}
	return def
}

func jsonArgs(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func onlyText(t *testing.T, res *tool.Result) string {
	t.Helper()
	if len(res.Content) != 1 || res.Content[0].GetText() == nil {
		t.Fatalf("want exactly one text block, got %d blocks: %v", len(res.Content), clip(fmt.Sprint(res.Content)))
	}
	return res.Content[0].GetText().GetText()
}

func (r *runner) echo(t *testing.T) {
	for _, text := range EchoTexts {
		got := onlyText(t, r.ok(t, Echo, jsonArgs("text", text)))
		if got != text {
			t.Errorf("echo: sent %q, got %q", clip(text), clip(got))
		}
	}
}

func (r *runner) concurrent(t *testing.T) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			text := fmt.Sprintf("call %d of %d", i, n)
			var res *tool.Result
			var err error
			select {
			case o := <-r.start(t.Context(), Echo, jsonArgs("text", text)):
				res, err = o.res, o.err
			case <-time.After(callTimeout):
				err = fmt.Errorf("no answer within %s", callTimeout)
			}
			switch {
			case err != nil:
				errs <- fmt.Errorf("call %d: %w", i, err)
			case len(res.Content) != 1 || res.Content[0].GetText().GetText() != text:
				errs <- fmt.Errorf("call %d: got %v, want %q", i, res.Content, text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (r *runner) structured(t *testing.T) {
	const text = `structured "ü" <out>`
	res := r.ok(t, Structured, jsonArgs("text", text))
	var got map[string]any
	if err := json.Unmarshal(res.Structured, &got); err != nil {
		t.Fatalf("structured output %q is not a JSON object: %v", clip(string(res.Structured)), err)
	}
	if got["text"] != text {
		t.Fatalf("structured output %s: want text %q", clip(string(res.Structured)), text)
	}
}

func (r *runner) image(t *testing.T) {
	res := r.ok(t, Image, "{}")
	img := oneBlock(t, res, func(c *toolwirev1.Content) bool { return c.GetImage() != nil }).GetImage()
	if !bytes.Equal(img.Data, r.s.Image) || img.MimeType != "image/png" {
		t.Fatalf("image: got %d bytes of %q, want %d bytes of image/png", len(img.Data), img.MimeType, len(r.s.Image))
	}
}

func (r *runner) audio(t *testing.T) {
	res := r.ok(t, Audio, "{}")
	a := oneBlock(t, res, func(c *toolwirev1.Content) bool { return c.GetAudio() != nil }).GetAudio()
	if !bytes.Equal(a.Data, r.s.Audio) || a.MimeType != "audio/wav" {
		t.Fatalf("audio: got %d bytes of %q, want %d bytes of audio/wav", len(a.Data), a.MimeType, len(r.s.Audio))
	}
}

func (r *runner) resourceLink(t *testing.T) {
	res := r.ok(t, ResourceLink, "{}")
	l := oneBlock(t, res, func(c *toolwirev1.Content) bool { return c.GetResourceLink() != nil }).GetResourceLink()
	if l.Uri != "file:///toolwire/link.txt" || l.Name != "link.txt" || l.MimeType != "text/plain" {
		t.Fatalf("resource link: got %v", l)
	}
}

func (r *runner) resource(t *testing.T) {
	res := r.ok(t, Resource, "{}")
	e := oneBlock(t, res, func(c *toolwirev1.Content) bool { return c.GetResource() != nil }).GetResource()
	if e.Uri != "file:///toolwire/embedded.txt" || e.MimeType != "text/plain" || e.GetText() != "embedded" {
		t.Fatalf("embedded resource: got %v", e)
	}
}

func oneBlock(t *testing.T, res *tool.Result, is func(*toolwirev1.Content) bool) *toolwirev1.Content {
	t.Helper()
	var found []*toolwirev1.Content
	for _, c := range res.Content {
		if is(c) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one block of the kind, got %d in %d blocks", len(found), len(res.Content))
	}
	return found[0]
}

func (r *runner) badArgs(t *testing.T) {
	r.fails(t, t.Context(), Echo, string(r.s.BadArgs), r.expect(BadArgs, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION))
	r.stillWorks(t)
}

// waitRunning polls until Block's work is seen running.
func (r *runner) waitRunning(t *testing.T, returned <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(startWithin)
	for !r.s.Running() {
		select {
		case <-returned:
			t.Fatal("block: Execute returned before its work was seen running")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("block: work not seen running within %s", startWithin)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// waitGone polls until Block's work has stopped.
func (r *runner) waitGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(goneWithin)
	for r.s.Running() {
		if time.Now().After(deadline) {
			t.Fatalf("block: the work still runs %s after Execute returned", goneWithin)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func (r *runner) timeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.fails(t, ctx, Block, "{}", toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT)
	if late := time.Since(start) - 500*time.Millisecond; late > stopWithin {
		t.Errorf("timeout: Execute returned %s after the deadline", late)
	}
	r.waitGone(t)
	r.stillWorks(t)
}

func (r *runner) cancel(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	done := r.start(ctx, Block, "{}")
	returned := make(chan struct{})
	var o outcome
	go func() {
		o = <-done
		close(returned)
	}()
	r.waitRunning(t, returned)
	cancelledAt := time.Now()
	cancel(errors.New("cancelled by executortest"))
	select {
	case <-returned:
	case <-time.After(callTimeout):
		t.Fatalf("cancel: Execute did not return within %s of the cancel", callTimeout)
	}
	if late := time.Since(cancelledAt); late > stopWithin {
		t.Errorf("cancel: Execute returned %s after the cancel", late)
	}
	te := failed(t, ctx, Block, "{}", o.res, o.err, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED)
	if te.SideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE {
		t.Errorf("cancel: a cancelled running call cannot claim no side effects")
	}
	r.waitGone(t)
	r.stillWorks(t)
}

type reporter struct {
	mu  sync.Mutex
	got []string
}

func (p *reporter) Progress(message string, percent float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, fmt.Sprintf("%s (%.0f%%)", message, percent))
}

func (r *runner) progress(t *testing.T) {
	rep := &reporter{}
	res, err := r.exec(t, tool.WithReporter(t.Context(), rep), Progress, "{}")
	if err != nil {
		t.Fatalf("progress: %v", err)
	}
	if len(res.Content) == 0 {
		t.Errorf("progress: no content")
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.got) < 2 {
		t.Fatalf("progress: want at least 2 reports, got %v", rep.got)
	}
}

func (r *runner) panic(t *testing.T) {
	r.fails(t, t.Context(), Panic, "{}", r.expect(Panic, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL))
	r.stillWorks(t)
}

func (r *runner) big(t *testing.T) {
	n := r.s.BigBytes
	if n == 0 {
		n = 4 << 20
	}
	res := r.ok(t, Big, jsonArgs("bytes", n))
	got := onlyText(t, res)
	switch {
	case len(got) == n && strings.Count(got, "x") == n:
	case strings.Contains(got, "truncated") && len(got) < n+4096:
	default:
		t.Fatalf("big: %d bytes asked, got %d bytes without a truncation marker", n, len(got))
	}
	r.stillWorks(t)
}

func (r *runner) intents(t *testing.T) {
	res := r.ok(t, Intents, "{}")
	want := []struct{ typ, payload string }{{"toolwire.test.first", `{"n":1}`}, {"toolwire.test.second", `{"n":2}`}}
	if len(res.Intents) != len(want) {
		t.Fatalf("intents: want %d, got %v", len(want), res.Intents)
	}
	ids := map[string]bool{}
	for i, w := range want {
		in := res.Intents[i]
		if in.Type != w.typ || !jsonEqual(in.PayloadJson, w.payload) {
			t.Errorf("intent %d: got %s %s, want %s %s", i, in.Type, in.PayloadJson, w.typ, w.payload)
		}
		if in.Id == "" || ids[in.Id] {
			t.Errorf("intent %d: id %q empty or repeated", i, in.Id)
		}
		ids[in.Id] = true
	}
}

func (r *runner) fail(t *testing.T) {
	for name, want := range r.s.Fail {
		t.Run(name, func(t *testing.T) {
			r.fails(t, t.Context(), Fail, jsonArgs("type", name), want)
		})
	}
	r.stillWorks(t)
}

// stillWorks proves the executor serves calls after a failure.
func (r *runner) stillWorks(t *testing.T) {
	t.Helper()
	if r.s.Tools[Echo] == nil {
		return
	}
	if got := onlyText(t, r.ok(t, Echo, jsonArgs("text", "still here"))); got != "still here" {
		t.Fatalf("after the check, echo answered %q", got)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
