package redact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

const (
	// canarySecret is the secret argument of every call; canaryRefused
	// breaks the schema's pattern, so admission refuses it (quoting it).
	canarySecret  = "canary-7c1f0e9d2b44-secret"
	canaryRefused = "CANARY-REFUSED-9f8e7d6c5b"
	canaryMark    = "7c1f0e9d2b44" // what must be found nowhere
	refusedMark   = "9f8e7d6c5b"
)

var canarySchema = `{"type":"object","properties":{
	"mode":{"type":"string"},
	"token":{"type":"string","pattern":"^canary-[a-z0-9-]+$","x-toolwire-secret":true}},
	"required":["mode","token"]}`

// canaryTool behaves by mode, quoting its secret argument in everything
// it says: progress, content, structured output, errors and panics.
func canaryTool(started chan<- string) executors.Func {
	return func(ctx context.Context, req *executors.Request) (*tool.Result, error) {
		var in struct{ Mode, Token string }
		if err := json.Unmarshal(req.Call.Arguments, &in); err != nil {
			return nil, tool.Permanent(err)
		}
		tool.Progress(ctx, "working with "+in.Token, -1)
		switch in.Mode {
		case "ok":
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text("echo " + in.Token)},
				Structured: []byte(`{"token":"` + in.Token + `"}`)}, nil
		case "big": // over MaxInlineBytes: the full response goes to the blob store
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text(in.Token + strings.Repeat(" filler", 2000) + " " + in.Token)}}, nil
		case "fail":
			return nil, tool.Permanent(fmt.Errorf("the server refused %s", in.Token))
		case "retry": // retryable: RETRYING events, then MAX_ATTEMPTS and a dead letter
			return nil, tool.Transient(fmt.Errorf("upstream busy for %s", in.Token))
		case "timeout": // runs into its start-to-close timeout
			<-ctx.Done()
			return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Message: "no answer for " + in.Token,
				Retryable: true, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
		case "cancel", "park": // waits to be cancelled
			started <- req.Call.CallId
			<-ctx.Done()
			return nil, fmt.Errorf("interrupted while using %s: %w", in.Token, context.Cause(ctx))
		case "panic":
			panic("cannot use " + in.Token)
		}
		return nil, tool.InvalidArgument("/mode", "unknown mode "+in.Mode)
	}
}

type canaryBundle struct {
	stack *dispatchtest.Stack
	d     *dispatch.Dispatcher
	logs  *logtest.Buffer
	spans *tracetest.SpanRecorder
}

func startCanaryStack(t *testing.T, started chan<- string) *canaryBundle {
	t.Helper()
	b := &canaryBundle{logs: &logtest.Buffer{}, spans: tracetest.NewSpanRecorder()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	log := b.logs.JSONLogger()
	b.stack = dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Dispatcher: dispatch.Config{Logger: log, TracerProvider: tp}})
	b.d = b.stack.Dispatcher

	// An http tool whose URL carries the secret: nothing listens on its
	// port, so net/http's error quotes the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	hx, err := httpexec.New(httpexec.Config{Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = hx.Close(context.Background()) })

	once := &toolwirev1.RetryPolicy{MaxAttempts: 1}
	specs := []*toolwirev1.ToolSpec{
		{Name: "canary", Provider: "test", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
			Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{}}, InputSchemaJson: canarySchema,
			Timeouts: &toolwirev1.Timeouts{StartToClose: durationpb.New(time.Second)},
			Retry:    &toolwirev1.RetryPolicy{MaxAttempts: 2, InitialInterval: durationpb.New(time.Millisecond)}},
		{Name: "canary-http", Provider: "test", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, Retry: once,
			Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{Method: "GET",
				UrlTemplate: fmt.Sprintf("http://127.0.0.1:%d/v1/{token}", port), QueryArgs: []string{"mode"},
				AllowNetworks: []string{"127.0.0.1/32"}, AllowPorts: []int32{int32(port)}}},
			InputSchemaJson: canarySchema},
	}
	w, err := worker.New(b.stack.Env.Open(t, "canary-worker"), worker.Config{
		Pools: []worker.Pool{{Concurrency: 8, PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}},
			{Concurrency: 8, PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{
			toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: canaryTool(started),
			toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP:   hx,
		},
		Specs: specs, MaxInlineBytes: 4096, Logger: log, TracerProvider: tp,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	b.stack.WaitTool(t, "canary")
	b.stack.WaitTool(t, "canary-http")
	return b
}

// TestCanaryNeverLeaves sends a canary secret argument through ok,
// failing, timed-out, dead-lettered, cancelled, panicking, refused and
// http calls, and looks for it in every sink: the answers, every stream
// but the calls and retries streams (which keep arguments to run them),
// dead letters but their calls, the blob store, log lines at Debug,
// spans, audit records with events, and `toolctl dlq list/show`.
func TestCanaryNeverLeaves(t *testing.T) {
	t.Parallel()
	started := make(chan string, 4)
	b := startCanaryStack(t, started)
	ctx, id := t.Context(), identity.Default
	args := func(mode, token string) string { return fmt.Sprintf(`{"mode":%q,"token":%q}`, mode, token) }
	var answers []proto.Message

	call := func(tl, mode, token string, want toolwirev1.ErrorType) *toolwirev1.ToolResponse {
		t.Helper()
		r, err := b.d.Call(ctx, id, &toolwirev1.CallRequest{Tool: tl, ArgumentsJson: args(mode, token)}, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, mode)
		require.Equal(t, want, r.Response.GetError().GetType(), "%s: %v", mode, r.Response.GetError())
		answers = append(answers, r)
		return r.Response
	}
	ok := call("canary", "ok", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED)
	require.Equal(t, "echo [REDACTED]", ok.Content[0].GetText().GetText())
	require.JSONEq(t, `{"token":"[REDACTED]"}`, ok.StructuredJson)
	big := call("canary", "big", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED)
	require.True(t, big.GetMeta().GetTruncated(), "the full response went to the blob store")
	require.Contains(t, call("canary", "fail", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT).Error.Message, "[REDACTED]")
	require.Contains(t, call("canary", "retry", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS).Error.Message, "[REDACTED]")
	require.Contains(t, call("canary", "timeout", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT).Error.Message, "[REDACTED]")
	require.Contains(t, call("canary", "panic", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL).Error.Message, "[REDACTED]")
	require.Contains(t, call("canary-http", "http", canarySecret, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS).Error.Message, "[REDACTED]")
	refused := call("canary", "ok", canaryRefused, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION)
	require.Contains(t, refused.Error.Message, "[REDACTED]", "the pattern error quotes the value")
	require.Contains(t, refused.Error.Violations[0].Message, "[REDACTED]")

	// Cancelled while running.
	sub, err := b.d.Submit(ctx, id, &toolwirev1.CallRequest{Tool: "canary", ArgumentsJson: args("cancel", canarySecret)})
	require.NoError(t, err)
	require.Equal(t, sub.CallID, receive(t, started))
	_, err = b.d.Cancel(ctx, id, sub.CallID, "the user gave up")
	require.NoError(t, err)
	res, err := b.d.GetResult(ctx, id, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, res.GetResponse().GetError().GetType())
	answers = append(answers, res)

	// A result stored in clear (as a worker without redaction wrote it):
	// audit redacts it when it reads it.
	sub, err = b.d.Submit(ctx, id, &toolwirev1.CallRequest{Tool: "canary", ArgumentsJson: args("park", canarySecret)})
	require.NoError(t, err)
	require.Equal(t, sub.CallID, receive(t, started))
	env := b.stack.Env
	old, err := proto.Marshal(&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: sub.CallID, Tool: "canary", Ok: true,
		Content: []*toolwirev1.Content{tool.Text("old worker says " + canarySecret)}})
	require.NoError(t, err)
	// Signed, as every result is (with the key of the stack's workers,
	// which its dispatcher believes).
	subject := env.Bus.Subjects.Result(id.Tenant, b.d.Name(), sub.CallID)
	_, err = env.Bus.JS.PublishMsg(ctx, env.Bus.Signer.SignedMsg(subject, signing.KindResult, sub.CallID, 0, old, nil))
	require.NoError(t, err)
	_, err = b.d.Cancel(ctx, id, sub.CallID, "done")
	require.NoError(t, err)
	parkedID := sub.CallID

	for _, a := range answers {
		requireClean(t, "answer", protojson.Format(a))
	}

	// The events stream has the progress events (core publishes: wait for
	// them), redacted.
	eventually(t, func() bool {
		return strings.Contains(streamText(t, env.Bus.Events), "working with [REDACTED]")
	}, "progress events")

	// Every stream. The calls and retries streams keep the arguments in
	// clear (that is what runs the call): the scan must find them there.
	names := env.Bus.JS.StreamNames(ctx)
	var scanned []string
	for name := range names.Name() {
		st, err := env.Bus.JS.Stream(ctx, name)
		require.NoError(t, err)
		text := streamText(t, st)
		switch name {
		case env.Bus.Config.CallsStream():
			require.Contains(t, text, canaryMark, "the calls stream stores arguments in clear")
			continue
		case env.Bus.Config.RetriesStream():
			continue
		case env.Bus.Config.DLQStream():
			text = dlqText(t, st)
			require.Contains(t, text, "[REDACTED]")
		case env.Bus.Config.ResultsStream():
			// The parked call's result was written in clear on purpose.
			text = strings.ReplaceAll(text, "old worker says "+canarySecret, "")
		}
		scanned = append(scanned, name)
		requireClean(t, "stream "+name, text)
	}
	require.NoError(t, names.Err())
	require.Contains(t, scanned, env.Bus.Config.EventsStream())
	require.Contains(t, strings.Join(scanned, " "), "OBJ_", "the blob store was scanned")

	// Audit records, with events.
	src, err := audit.Open(ctx, env.Bus.NC, env.Bus.Config.Prefix)
	require.NoError(t, err)
	var records []string
	_, err = src.Run(ctx, audit.Filter{}, audit.Options{Events: true}, func(r *audit.Record) error {
		j, err := json.Marshal(r)
		records = append(records, string(j))
		if r.CallID == parkedID {
			require.Contains(t, string(r.Response), "old worker says [REDACTED]")
		}
		return err
	})
	require.NoError(t, err)
	require.Len(t, records, 9, "every admitted call")
	requireClean(t, "audit", strings.Join(records, "\n"))

	// toolctl dlq.
	dlqEnv := map[string]string{"TOOLWIRE_NATS_URL": env.URL}
	var out []string
	for _, a := range [][]string{{"dlq", "list"}, {"-o", "json", "dlq", "list"}, {"dlq", "show", "1"}, {"dlq", "show", "2"}, {"-o", "json", "dlq", "show", "2"}} {
		var stdout, stderr bytes.Buffer
		code := toolctl.Run(ctx, a, toolctl.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
			LookupEnv: func(k string) (string, bool) { v, ok := dlqEnv[k]; return v, ok }})
		require.Equal(t, toolctl.ExitOK, code, "%v: %s", a, stderr.String())
		out = append(out, stdout.String(), stderr.String())
	}
	require.Contains(t, strings.Join(out, ""), `"token":"[REDACTED]"`)
	requireClean(t, "toolctl dlq", strings.Join(out, "\n"))

	// Spans and log lines.
	var spans []string
	for _, s := range b.spans.Ended() {
		spans = append(spans, s.Name(), s.Status().Description)
		for _, kv := range s.Attributes() {
			spans = append(spans, kv.Value.String())
		}
		for _, e := range s.Events() {
			spans = append(spans, e.Name)
			for _, kv := range e.Attributes {
				spans = append(spans, kv.Value.String())
			}
		}
	}
	require.Contains(t, strings.Join(spans, "\n"), "[REDACTED]", "span statuses carry the redacted errors")
	requireClean(t, "spans", strings.Join(spans, "\n"))
	logs := b.logs.String()
	require.Contains(t, logs, "executor panicked")
	require.Contains(t, logs, "http tool request failed")
	requireClean(t, "logs", logs)
}

// requireClean fails when text holds either canary.
func requireClean(t *testing.T, where, text string) {
	t.Helper()
	for _, mark := range []string{canaryMark, refusedMark} {
		if i := strings.Index(text, mark); i >= 0 {
			t.Fatalf("%s shows a secret: …%s…", where, text[max(0, i-200):min(len(text), i+100)])
		}
	}
}

// streamText returns every message of st (subject and data) as text.
func streamText(t *testing.T, st jetstream.Stream) string {
	t.Helper()
	var b strings.Builder
	for _, m := range messages(t, st) {
		b.WriteString(m.Subject())
		b.WriteByte(' ')
		b.Write(m.Data())
		b.WriteByte('\n')
	}
	return b.String()
}

// dlqText returns the dead letters of st as text, without the arguments
// of their calls (kept for retries, like the calls stream).
func dlqText(t *testing.T, st jetstream.Stream) string {
	t.Helper()
	var b strings.Builder
	for _, m := range messages(t, st) {
		dl := &toolwirev1.DeadLetter{}
		require.NoError(t, proto.Unmarshal(m.Data(), dl))
		require.Contains(t, string(dl.GetCall().GetArguments()), canaryMark, "a dead letter keeps the call it retries")
		dl.Call.Arguments = nil
		b.WriteString(protojson.Format(dl))
	}
	return b.String()
}

func messages(t *testing.T, st jetstream.Stream) []jetstream.Msg {
	t.Helper()
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []jetstream.Msg
	for {
		batch, err := cons.FetchNoWait(256)
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			out = append(out, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			require.NoError(t, err)
		}
		if n == 0 {
			return out
		}
	}
}

// receive waits for the next value of ch, failing after 20s.
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("the call never started")
		return ""
	}
}

// eventually polls cond until it holds, failing after 10s.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline), "%s: not seen in 10s", what)
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
