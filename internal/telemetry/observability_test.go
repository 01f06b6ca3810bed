package telemetry_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type input struct {
	Text string `json:"text"`
}

// flakyTool fails transiently on its first execution, then echoes.
func flakyTool(t *testing.T) *tool.Tool {
	var runs atomic.Int32
	return tool.Must(tool.New("flaky", func(_ context.Context, in input) (string, error) {
		if runs.Add(1) == 1 {
			return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true, Message: "try again",
				SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
		}
		return in.Text, nil
	}, tool.WithDescription("Fails once, then echoes.")))
}

func echoTool() *tool.Tool {
	return tool.Must(tool.New("say", func(_ context.Context, in input) (string, error) { return in.Text, nil },
		tool.WithDescription("Echoes.")))
}

func failTool() *tool.Tool {
	return tool.Must(tool.New("refuse", func(_ context.Context, in input) (string, error) {
		return "", &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "never",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}, tool.WithDescription("Always fails permanently.")))
}

type bundle struct {
	stack      *dispatchtest.Stack
	dispatcher *dispatch.Dispatcher
	worker     *workerconfig.Worker
	dreg, wreg *prometheus.Registry
}

// setup starts JetStream, a worker serving tools and a dispatcher, both
// observed by tp (may be nil) and by registries of their own.
func setup(t *testing.T, tp trace.TracerProvider, tools ...*tool.Tool) bundle {
	t.Helper()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Tools: tools})
	bd := bundle{stack: s, dreg: prometheus.NewRegistry(), wreg: prometheus.NewRegistry()}
	b := s.Env.Open(t, "observed-worker")
	wm, err := telemetry.NewWorkerMetrics(bd.wreg)
	require.NoError(t, err)
	w, err := workerconfig.NewWorker(t.Context(), b, nil, workerconfig.Options{Tools: tools, TracerProvider: tp, Metrics: wm})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	bd.worker = w
	bd.wreg.MustRegister(&telemetry.StreamStats{Calls: b.Calls, Consumers: w.PoolConsumers,
		PoolPrefix: b.Config.Prefix + "_pool_"})
	dm, err := telemetry.NewDispatcherMetrics(bd.dreg)
	require.NoError(t, err)
	bd.dreg.MustRegister(&telemetry.StreamStats{Calls: s.Env.Bus.Calls, DLQ: s.Env.Bus.DLQ, PoolPrefix: s.Env.Bus.Config.Prefix + "_pool_"})
	bd.dispatcher = s.StartDispatcher(t, dispatch.Config{TracerProvider: tp, Metrics: dm})
	for _, tl := range tools {
		s.WaitTool(t, tl.Name())
	}
	return bd
}

func (bd bundle) call(t *testing.T, name, text string) *toolwirev1.ToolResponse {
	t.Helper()
	a, err := structpb.NewStruct(map[string]any{"text": text})
	require.NoError(t, err)
	r, err := bd.dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: name, Arguments: a}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	return r.Response
}

// eventually polls cond every few milliseconds until it holds, failing
// after 10s with the last reason.
func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// The span tree of one call that fails transiently once and then
// succeeds, all in ONE trace:
//
//	admit                              (dispatcher, internal)
//	└─ send TOOLWIRE_CALLS             (dispatcher, PRODUCER; context → NATS headers)
//	   └─ process toolwire_pool_native (worker, CONSUMER, remote parent; one per delivery)
//	      ├─ attempt flaky             (attempt 1)
//	      │  └─ execute_tool flaky     (the executor decorator; error)
//	      └─ attempt flaky             (attempt 2, an in-process retry)
//	         └─ execute_tool flaky     (ok)
func TestOneTraceFromDispatcherThroughWorkerToExecutor(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	bd := setup(t, tp, flakyTool(t))

	resp := bd.call(t, "flaky", "hello")
	require.True(t, resp.Ok, "%v", resp.Error)
	require.Equal(t, int32(2), resp.Meta.Attempt)

	byName := map[string][]sdktrace.ReadOnlySpan{}
	eventually(t, func() error { // the consumer span ends after the ack, just after the result
		byName = map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			byName[strings.Fields(s.Name())[0]] = append(byName[strings.Fields(s.Name())[0]], s)
		}
		if len(byName["process"]) != 1 || len(byName["admit"]) != 1 {
			return fmt.Errorf("spans so far: %v", byName)
		}
		return nil
	})
	admit, send, process := byName["admit"][0], byName["send"], byName["process"][0]
	require.Len(t, send, 1)
	require.Len(t, byName["attempt"], 2)
	require.Len(t, byName["execute_tool"], 2)
	traceID := admit.SpanContext().TraceID()
	for _, ss := range byName {
		for _, s := range ss {
			require.Equal(t, traceID, s.SpanContext().TraceID(), "span %q is in another trace", s.Name())
		}
	}

	require.False(t, admit.Parent().IsValid(), "admission is the root here")
	require.Equal(t, telemetry.AdmissionAccepted, attr(admit, "toolwire.admission.outcome"))
	require.Equal(t, resp.CallId, attr(admit, "gen_ai.tool.call.id"))

	require.Equal(t, admit.SpanContext().SpanID(), send[0].Parent().SpanID())
	require.Equal(t, trace.SpanKindProducer, send[0].SpanKind())
	require.Equal(t, "nats", attr(send[0], "messaging.system"))
	require.Equal(t, resp.CallId, attr(send[0], "messaging.message.id"))
	require.True(t, strings.HasPrefix(attr(send[0], "messaging.destination.name"), "toolwire.call.native."))

	require.Equal(t, send[0].SpanContext().SpanID(), process.Parent().SpanID())
	require.True(t, process.Parent().IsRemote(), "the consumer's parent arrived in the message headers")
	require.Equal(t, trace.SpanKindConsumer, process.SpanKind())
	require.Equal(t, "nats", attr(process, "messaging.system"))
	require.Equal(t, "toolwire_pool_native", attr(process, "messaging.consumer.group.name"))
	require.Equal(t, resp.CallId, attr(process, "messaging.message.id"))
	require.Equal(t, attr(send[0], "messaging.destination.name"), attr(process, "messaging.destination.name"))

	attempts := map[string]sdktrace.ReadOnlySpan{}
	for _, a := range byName["attempt"] {
		require.Equal(t, process.SpanContext().SpanID(), a.Parent().SpanID(), "attempts are children of the delivery")
		attempts[attr(a, "toolwire.attempt")] = a
	}
	require.Contains(t, attempts, "1")
	require.Contains(t, attempts, "2")
	for _, x := range byName["execute_tool"] {
		require.Equal(t, "execute_tool flaky", x.Name())
		require.Equal(t, "execute_tool", attr(x, "gen_ai.operation.name"))
		require.Equal(t, "flaky", attr(x, "gen_ai.tool.name"))
		require.Equal(t, resp.CallId, attr(x, "gen_ai.tool.call.id"))
		parent := attempts[attr(x, "toolwire.attempt")]
		require.NotNil(t, parent)
		require.Equal(t, parent.SpanContext().SpanID(), x.Parent().SpanID(), "each execution is a child of its attempt")
		if attr(x, "toolwire.attempt") == "1" {
			require.Equal(t, "transient", attr(x, "error.type"))
		} else {
			require.Empty(t, attr(x, "error.type"))
		}
	}
}

// scrape reads a Prometheus text exposition into series → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

func serve(t *testing.T, ready telemetry.ReadyFunc, g prometheus.Gatherer) string {
	srv := httptest.NewServer(telemetry.Mux(ready, g))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestPrometheusEndpointsCountCalls(t *testing.T) {
	t.Parallel()
	bd := setup(t, nil, echoTool(), failTool())
	wURL := serve(t, bd.worker.Ready, bd.wreg)
	dURL := serve(t, func(context.Context) error { return nil }, bd.dreg)

	const n = 7
	for i := range n {
		require.True(t, bd.call(t, "say", strconv.Itoa(i)).Ok)
	}
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, bd.call(t, "refuse", "x").Error.GetType())
	rej := bd.call(t, "no_such_tool", "x")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, rej.Error.GetType())

	want := map[string]float64{
		`toolwire_calls_total{executor="native",outcome="ok",tool="say"}`:           n,
		`toolwire_calls_total{executor="native",outcome="permanent",tool="refuse"}`: 1,
		`toolwire_executions_total{executor="native",outcome="ok",tool="say"}`:      n,
		`toolwire_execution_duration_seconds_count{executor="native",tool="say"}`:   n,
		`toolwire_queue_wait_seconds_count{executor="native",tool="say"}`:           n,
		`toolwire_call_duration_seconds_count{executor="native",tool="say"}`:        n,
		`toolwire_call_duration_seconds_count{executor="native",tool="refuse"}`:     1,
		`toolwire_inflight_calls{pool="native"}`:                                    0,
		`toolwire_pool_lag_messages{pool="native"}`:                                 0,
		`toolwire_pool_ack_pending_messages{pool="native"}`:                         0,
	}
	eventually(t, func() error { // results are counted once published, just before the ack
		return expect(scrape(t, wURL+"/metrics"), want)
	})
	require.NoError(t, expect(scrape(t, dURL+"/metrics"), map[string]float64{
		`toolwire_dispatcher_calls_total{outcome="accepted"}`:      n + 1,
		`toolwire_dispatcher_calls_total{outcome="rejected"}`:      1,
		`toolwire_dispatcher_rejections_total{reason="not_found"}`: 1,
		`toolwire_dispatcher_admission_duration_seconds_count`:     n + 1,
		`toolwire_dispatcher_waiting_callers`:                      0,
		`toolwire_dlq_messages`:                                    0,
	}))

	for _, u := range []string{wURL, dURL} {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(u + path)
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, u+path)
		}
	}
}

func expect(got, want map[string]float64) error {
	var errs []error
	for k, v := range want {
		g, ok := got[k]
		if !ok || g != v {
			errs = append(errs, fmt.Errorf("%s = %v (present %v), want %v", k, g, ok, v))
		}
	}
	return errors.Join(errs...)
}
