package httpexec_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/internal/logtest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// pngBytes and wavBytes are what the image and audio endpoints serve.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	wavBytes = []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00")
)

// failStatuses are the statuses the /fail endpoint answers, by name.
var failStatuses = map[string]int{
	"bad_request":   http.StatusBadRequest,
	"unauthorized":  http.StatusUnauthorized,
	"forbidden":     http.StatusForbidden,
	"not_found":     http.StatusNotFound,
	"gone":          http.StatusGone,
	"conflict":      http.StatusConflict,
	"teapot":        http.StatusTeapot,
	"unprocessable": http.StatusUnprocessableEntity,
	"rate_limit":    http.StatusTooManyRequests,
	"server_error":  http.StatusInternalServerError,
	"bad_gateway":   http.StatusBadGateway,
	"unavailable":   http.StatusServiceUnavailable,
	"not_impl":      http.StatusNotImplemented,
	"timeout":       http.StatusRequestTimeout,
}

// server is a real HTTP server with one endpoint per behaviour.
type server struct {
	*httptest.Server
	port    int32
	running atomic.Int64  // /block handlers still running
	stop    chan struct{} // closed at clean-up: blocked handlers return
	hits    atomic.Int64  // requests received

	mu   sync.Mutex
	last *http.Request // the last request seen, body read into lastBody
	body []byte
}

func newServer(t testing.TB) *server {
	t.Helper()
	s := &server{stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, r.URL.Query().Get("text"))
	})
	mux.HandleFunc("POST /structured", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	})
	mux.HandleFunc("/audio", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/wav")
		w.Write(wavBytes)
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.running.Add(1)
		defer s.running.Add(-1)
		// net/http watches the connection for a close only once the
		// body has been read.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	})
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler) // net/http closes the connection without an answer
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/intents", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"intents":[{"type":"toolwire.test.first","payload":{"n":1}},{"type":"toolwire.test.second","payload":{"n": 2}}],"after":1}`)
	})
	mux.HandleFunc("/intents-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Intents", `[{"type":"toolwire.test.first","payload":{"n":1}},{"type":"toolwire.test.second","payload":{"n":2}}]`)
		io.WriteString(w, "done")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		code := failStatuses[r.URL.Query().Get("type")]
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"failed with %d"}`, code)
	})
	record := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.last, s.body = r, b
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"path": r.URL.EscapedPath(), "query": r.URL.RawQuery})
	}
	mux.HandleFunc("/fail-echo", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "bad key: "+r.Header.Get("X-Api-Key"))
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r.Header)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/gzipbomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
		zeros := bytes.Repeat([]byte("a"), 1<<20)
		for range 64 { // 64 MiB decompressed, about 64 KiB on the wire
			if _, err := zw.Write(zeros); err != nil {
				return
			}
		}
		zw.Close()
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		io.WriteString(w, "first bytes")
		w.(http.Flusher).Flush()
		select { // the rest never comes
		case <-r.Context().Done():
		case <-s.stop:
		}
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if strings.HasPrefix(r.URL.EscapedPath(), "/record/") { // unclean paths too: no ServeMux redirect
			record(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(s.stop)
		s.Close()
	})
	s.port = int32(s.Listener.Addr().(*net.TCPAddr).Port)
	return s
}

func (s *server) lastRequest() (*http.Request, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.body
}

// spec is an http tool on s: the server's address is allowlisted (it is
// loopback), and props name the input schema's properties.
func (s *server) spec(name, method, path string, props []string, mod func(*toolwirev1.HttpConfig)) *toolwirev1.ToolSpec {
	hc := &toolwirev1.HttpConfig{
		Method:        method,
		UrlTemplate:   s.URL + path,
		AllowNetworks: []string{"127.0.0.1/32"},
		AllowPorts:    []int32{s.port},
	}
	if mod != nil {
		mod(hc)
	}
	return &toolwirev1.ToolSpec{
		Name:            name,
		Executor:        toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
		Config:          &toolwirev1.ToolSpec_Http{Http: hc},
		InputSchemaJson: schema(props...),
	}
}

func schema(props ...string) string {
	m := map[string]any{}
	for _, p := range props {
		m[p] = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": m})
	return string(b)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = logtest.Buffer

// fakeResolver maps names to addresses; anything else does not exist.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type bundle struct {
	srv  *server
	exec *httpexec.Executor
	logs *syncBuffer
}

// setup starts a server and an executor logging at Debug into a buffer.
func setup(t *testing.T, cfg httpexec.Config) *bundle {
	t.Helper()
	b := &bundle{srv: newServer(t), logs: &syncBuffer{}}
	cfg.Logger = slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	exec, err := httpexec.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close(context.Background()) })
	b.exec = exec
	return b
}

var callN atomic.Int64

func call(t *testing.T, e *httpexec.Executor, spec *toolwirev1.ToolSpec, args string) (*tool.Result, error) {
	t.Helper()
	return callCtx(t.Context(), e, spec, args)
}

func callCtx(ctx context.Context, e *httpexec.Executor, spec *toolwirev1.ToolSpec, args string) (*tool.Result, error) {
	return e.Execute(ctx, &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: fmt.Sprintf("01CALL%d", callN.Add(1)), Tool: spec.GetName(), Arguments: []byte(args), Attempt: 1},
		Spec: spec,
	})
}

// toolErr asserts err is a *tool.Error and returns it.
func toolErr(t *testing.T, err error) *tool.Error {
	t.Helper()
	require.Error(t, err)
	te, ok := err.(*tool.Error)
	require.Truef(t, ok, "want a *tool.Error, got %T: %v", err, err)
	return te
}

func text(t *testing.T, res *tool.Result) string {
	t.Helper()
	require.Len(t, res.Content, 1)
	require.NotNil(t, res.Content[0].GetText(), "want a text block")
	return res.Content[0].GetText().GetText()
}

// request is a call of spec with a chosen call id.
func request(spec *toolwirev1.ToolSpec, callID, args string) *executors.Request {
	return &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: callID, Tool: spec.GetName(), Arguments: []byte(args), Attempt: 1},
		Spec: spec,
	}
}
