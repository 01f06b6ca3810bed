package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// countingTool counts its executions: a refused request never reaches it.
func countingTool(runs *atomic.Int64) *tool.Tool {
	return tool.Must(tool.New("count", func(_ context.Context, in json.RawMessage) (string, error) {
		runs.Add(1)
		return fmt.Sprintf("%d bytes", len(in)), nil
	}))
}

// limitsStack serves the counting tool and the built-in tools behind the
// real HTTP API.
func limitsStack(t *testing.T, cfg dispatch.Config) (*dispatchtest.Stack, *atomic.Int64) {
	t.Helper()
	runs := new(atomic.Int64)
	tools := append(builtin.Tools(), countingTool(runs))
	return dispatchtest.Start(t, dispatchtest.Options{Tools: tools, Dispatcher: cfg}), runs
}

// connectError is the JSON error body of the Connect protocol.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// postJSON posts body as a Connect unary JSON request to method and
// returns the HTTP status and the decoded error, if any.
func postJSON(t *testing.T, url, method string, body io.Reader, header http.Header) (int, connectError) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/toolwire.v1.DispatcherService/"+method, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var ce connectError
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&ce))
	}
	return resp.StatusCode, ce
}

// endless is a JSON request body of n bytes produced as it is read: a
// call of count whose arguments_json is {"s":"xxx…"}. read counts what the
// server took.
type endless struct {
	head, tail string
	n, off     int64
	read       atomic.Int64
}

func newEndless(n int64) *endless {
	return &endless{head: `{"tool":"count","arguments_json":"{\"s\":\"`, tail: `\"}"}`, n: n}
}

func (e *endless) Read(p []byte) (int, error) {
	if e.off >= e.n {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && e.off < e.n {
		switch {
		case e.off < int64(len(e.head)):
			p[k] = e.head[e.off]
		case e.off >= e.n-int64(len(e.tail)):
			p[k] = e.tail[e.off-(e.n-int64(len(e.tail)))]
		default:
			p[k] = 'x'
		}
		k++
		e.off++
	}
	e.read.Add(int64(k))
	return k, nil
}

// noTrace asserts that nothing was admitted, queued, recorded or run.
func noTrace(t *testing.T, s *dispatchtest.Stack, runs *atomic.Int64) {
	t.Helper()
	calls, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, calls.State.Msgs, "nothing queued")
	events, err := s.Env.Bus.Events.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, events.State.Msgs, "nothing admitted or rejected: the request was never decoded")
	require.Zero(t, runs.Load())
}

// A 100 MB body is refused with resource_exhausted while it is read: the
// server stops reading a little past the limit and never decodes it.
func TestOversizedBodyIsRefusedWhileRead(t *testing.T) {
	t.Parallel()
	s, runs := limitsStack(t, dispatch.Config{})
	const size = 100 << 20
	body := newEndless(size)
	status, ce := postJSON(t, s.URL, "Call", body, nil)
	require.Equal(t, http.StatusTooManyRequests, status, "%+v", ce)
	require.Equal(t, "resource_exhausted", ce.Code)
	require.Contains(t, ce.Message, "larger than configured max")
	// What the server read, plus what the sockets' buffers took in.
	require.Less(t, body.read.Load(), int64(size/4), "the server stopped reading")
	noTrace(t, s, runs)

	// The same in binary protobuf, through the Connect client.
	_, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "count",
		ArgumentsJson: `{"s":"` + strings.Repeat("x", 400<<10) + `"}`}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	noTrace(t, s, runs)
}

// A gzip body that inflates past the limit is refused without inflating
// the rest of it.
func TestGzipBombIsRefused(t *testing.T) {
	t.Parallel()
	s, runs := limitsStack(t, dispatch.Config{})
	var bomb bytes.Buffer
	zw, err := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	require.NoError(t, err)
	_, err = io.Copy(zw, io.LimitReader(newEndless(200<<20), 200<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.Less(t, bomb.Len(), 320<<10, "the compressed body is within the limit")

	status, ce := postJSON(t, s.URL, "Call", &bomb, http.Header{"Content-Encoding": {"gzip"}})
	require.Equal(t, http.StatusTooManyRequests, status, "%+v", ce)
	require.Equal(t, "resource_exhausted", ce.Code)
	noTrace(t, s, runs)
}

// Every route of the dispatcher's server bounds bodies, not only the API.
func TestLimitBodyBoundsEveryRoute(t *testing.T) {
	t.Parallel()
	var read atomic.Int64
	var readErr atomic.Value
	h := api.LimitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		read.Store(n)
		if err != nil {
			readErr.Store(err)
		}
	}), 64<<10)
	req, err := http.NewRequest(http.MethodPost, "/healthz", newEndless(10<<20))
	require.NoError(t, err)
	h.ServeHTTP(discard{}, req)
	require.LessOrEqual(t, read.Load(), int64(65<<10))
	var mbe *http.MaxBytesError
	require.ErrorAs(t, readErr.Load().(error), &mbe)
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// structArgs returns a request whose arguments object has n members.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"tool":"count","arguments":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString("}}")
	return b.String()
}

// Structured arguments with too many members or elements, or nested too
// deep, are refused before protojson builds them, in JSON and in binary.
func TestStructuredArgumentsAreBounded(t *testing.T) {
	t.Parallel()
	s, runs := limitsStack(t, dispatch.Config{MaxArgsValues: 1000}) // the body scan allows 1064
	cases := map[string]struct {
		body string
		want string
	}{
		"many keys":     {manyKeys(1100), "more than 1064 JSON members and elements"},
		"long array":    {`{"tool":"count","arguments":{"a":[` + strings.Repeat("0,", 1100) + `0]}}`, "more than 1064"},
		"deep objects":  {`{"tool":"count","arguments":` + strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70) + "}", "deeper than 64 levels"},
		"deep arrays":   {`{"tool":"count","arguments":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}}", "deeper than 64 levels"},
		"unknown field": {`{"tool":"count","zzz":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "}", "deeper than 64 levels"},
	}
	for name, tc := range cases {
		status, ce := postJSON(t, s.URL, "Call", strings.NewReader(tc.body), nil)
		require.Equal(t, http.StatusBadRequest, status, name)
		require.Equal(t, "invalid_argument", ce.Code, name)
		require.Contains(t, ce.Message, tc.want, name)
	}
	noTrace(t, s, runs)

	// Binary protobuf, through the Connect client.
	wide := map[string]any{}
	for i := range 1100 {
		wide[fmt.Sprint("k", i)] = i
	}
	var deep any = 1.0
	for range 70 {
		deep = map[string]any{"a": deep}
	}
	for name, v := range map[string]map[string]any{"many keys": wide, "deep": deep.(map[string]any),
		"long array": {"a": make([]any, 1100)}} {
		st, err := structpb.NewStruct(v)
		require.NoError(t, err, name)
		_, err = s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "count", Arguments: st}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", name, err)
		require.ErrorContains(t, err, "request too complex", name)
	}
	noTrace(t, s, runs)

	// Within the limits, both forms still reach the tool.
	status, ce := postJSON(t, s.URL, "Call", strings.NewReader(manyKeys(990)), nil)
	require.Equal(t, http.StatusOK, status, "%+v", ce)
	st, err := structpb.NewStruct(map[string]any{"a": make([]any, 900), "b": map[string]any{"c": []any{"d", 1.0, true}}})
	require.NoError(t, err)
	r, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "count", Arguments: st, Wait: durationpb.New(20 * time.Second)}))
	require.NoError(t, err)
	require.True(t, r.Msg.Response.GetOk(), "%v", r.Msg.Response.GetError())
	require.Equal(t, int64(2), runs.Load())
}

// Admission bounds the members and elements of the arguments in either
// form (arguments_json is a string the body scan does not look into), and
// a rejection lists a bounded number of violations.
func TestArgumentValuesAreBoundedAtAdmission(t *testing.T) {
	t.Parallel()
	s, runs := limitsStack(t, dispatch.Config{MaxArgsValues: 1000})
	wide := strings.TrimPrefix(strings.TrimSuffix(manyKeys(1001), "}"), `{"tool":"count","arguments":`)
	for name, o := range map[string]*toolwirev1.CallRequest{
		"arguments_json": {Tool: "count", ArgumentsJson: wide},
		"arguments":      {Tool: "count", Arguments: mustStruct(t, wide)},
	} {
		r := call(t, s.Client, o)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Response.GetError().GetType(), name)
		require.Contains(t, r.Response.Error.Message, "more than the limit of 1000 members and elements", name)
	}
	require.Zero(t, runs.Load())
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "count", ArgumentsJson: strings.TrimPrefix(strings.TrimSuffix(manyKeys(999), "}"), `{"tool":"count","arguments":`)})
	require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())

	// 30 unknown fields and a missing one: 31 violations, 20 listed.
	r = call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: strings.TrimPrefix(strings.TrimSuffix(manyKeys(30), "}"), `{"tool":"count","arguments":`)})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Response.GetError().GetType())
	require.Len(t, r.Response.Error.Violations, 20)
	require.Contains(t, r.Response.Error.Message, "and 11 more")
}

func mustStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	st := &structpb.Struct{}
	require.NoError(t, st.UnmarshalJSON([]byte(js)))
	return st
}

// A legal request at the argument limit still works in both encodings:
// the body limit sits a little above the argument limit.
func TestRequestAtTheArgumentLimitWorks(t *testing.T) {
	t.Parallel()
	s, runs := limitsStack(t, dispatch.Config{})
	x := strings.Repeat("x", 256<<10-len(`{"s":""}`))
	r, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "count",
		ArgumentsJson: `{"s":"` + x + `"}`, Wait: durationpb.New(20 * time.Second)}))
	require.NoError(t, err)
	require.True(t, r.Msg.Response.GetOk(), "%v", r.Msg.Response.GetError())
	require.Equal(t, fmt.Sprintf("%d bytes", 256<<10), r.Msg.Response.Content[0].GetText().Text)

	body := `{"tool":"count","wait":"20s","arguments":{"s":"` + x + `"}}`
	status, ce := postJSON(t, s.URL, "Call", strings.NewReader(body), nil)
	require.Equal(t, http.StatusOK, status, "%+v", ce)
	require.Equal(t, int64(2), runs.Load())
}

// The API's gzip decompressor stops inflating a little past its limit
// instead of inflating the whole bomb to measure it.
func TestBoundedGzipStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	_, err := io.Copy(zw, io.LimitReader(newEndless(100<<20), 100<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	dec, err := api.NewBoundedGzip(&bomb, 64<<10)
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, dec)
	var mbe *http.MaxBytesError
	require.ErrorAs(t, err, &mbe)
	require.Equal(t, int64(64<<10+1), n, "one byte past the limit, as Connect reads")
	require.NoError(t, dec.Close())
}

// curl -d without a Content-Type (form encoding) gets a 415 that says what
// to send, not an empty body.
func TestUnsupportedContentTypeIsExplained(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/toolwire.v1.DispatcherService/Call",
			strings.NewReader(`{"tool":"echo","arguments":{"text":"hi"}}`))
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, ct)
		require.Contains(t, string(body), "Content-Type: application/json", ct)
	}
}
