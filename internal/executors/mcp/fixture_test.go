package mcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/logtest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/executors/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Environment of the fixture server when the test binary runs as a stdio
// MCP server (see TestMain).
const (
	envFixture = "TOOLWIRE_MCP_FIXTURE"  // "stdio": serve the fixture on stdin/stdout
	envRunning = "TOOLWIRE_MCP_RUNNING"  // directory of running block calls' marker files
	envPIDFile = "TOOLWIRE_MCP_PIDFILE"  // file the server writes its pid into
	envVariant = "TOOLWIRE_MCP_VARIANT"  // definition variant of the "versioned" tool
	envChild   = "TOOLWIRE_MCP_GRANDKID" // path of sleep(1): also start it as a grandchild
	envDecor   = "TOOLWIRE_MCP_DECORATE" // "1": add what the SDK cannot say (decorate)
	envCounter = "TOOLWIRE_MCP_COUNTER"  // "1": add "bump", counting the process's calls
)

func TestMain(m *testing.M) {
	if os.Getenv(envFixture) == "stdio" {
		os.Exit(serveStdio())
	}
	goleak.VerifyTestMain(m, testdeps.IgnoreNATS())
}

// serveStdio runs the fixture server on stdin/stdout until stdin closes.
func serveStdio() int {
	if f := os.Getenv(envPIDFile); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if f, sleep := os.Getenv(envPIDFile), os.Getenv(envChild); f != "" && sleep != "" {
		// A grandchild in the server's process group, to prove the group
		// is killed.
		grand := exec.Command(sleep, "300")
		if err := grand.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = os.WriteFile(f+".grandchild", []byte(strconv.Itoa(grand.Process.Pid)), 0o600)
	}
	srv := newFixtureServer(fixtureOptions{
		running: os.Getenv(envRunning),
		variant: os.Getenv(envVariant),
		panics:  true,
		counter: os.Getenv(envCounter) == "1",
	})
	var t sdk.Transport = &sdk.StdioTransport{}
	if os.Getenv(envDecor) == "1" {
		t = decoratingTransport{t}
	}
	if err := srv.Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "fixture server:", err)
	}
	return 0
}

type fixtureOptions struct {
	// running is the directory where block calls keep a marker file while
	// their handler runs.
	running string
	// variant changes the definition of the "versioned" tool.
	variant string
	// panics registers the panic tool (only in a separate process: the
	// SDK does not recover handler panics).
	panics bool
	// counter registers "bump", which answers the number of its calls in
	// this process (for stdio: in this session).
	counter bool
}

type textIn struct {
	Text string `json:"text"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

type failIn struct {
	Type string `json:"type"`
}

type empty struct{}

// fixturePNG and fixtureWAV are the bytes of the image and audio fixtures.
var fixturePNG, fixtureWAV = func() ([]byte, []byte) {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 1, color.RGBA{B: 255, A: 255})
	var p bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		panic(err)
	}
	var w bytes.Buffer
	samples := []int16{0, 1000, -1000, 0}
	w.WriteString("RIFF")
	_ = binary.Write(&w, binary.LittleEndian, uint32(36+2*len(samples)))
	w.WriteString("WAVEfmt ")
	_ = binary.Write(&w, binary.LittleEndian, []any{uint32(16), uint16(1), uint16(1), uint32(8000), uint32(16000), uint16(2), uint16(16)})
	w.WriteString("data")
	_ = binary.Write(&w, binary.LittleEndian, uint32(2*len(samples)))
	_ = binary.Write(&w, binary.LittleEndian, samples)
	return p.Bytes(), w.Bytes()
}()

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newFixtureServer builds the MCP server with one tool per conformance
// fixture, plus "versioned" for the definition-change tests.
func newFixtureServer(o fixtureOptions) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "toolwire-fixture", Version: "1"}, nil)
	if o.counter {
		var n atomic.Int64
		sdk.AddTool(srv, &sdk.Tool{Name: "bump", Description: "Counts the calls of this process."},
			func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
				return text(strconv.FormatInt(n.Add(1), 10)), nil, nil
			})
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "structured", Description: "Echoes text as structured output."},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, textIn, error) {
			return nil, in, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "image", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, Title: "An image"}},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: fixturePNG, MIMEType: "image/png"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "audio"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: fixtureWAV, MIMEType: "audio/wav"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "resource_link"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{
				URI: "file:///toolwire/link.txt", Name: "link.txt", MIMEType: "text/plain"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "resource"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
				URI: "file:///toolwire/embedded.txt", MIMEType: "text/plain", Text: "embedded"}}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "block", Description: "Runs until cancelled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			f, err := os.CreateTemp(o.running, "block-")
			if err != nil {
				return nil, nil, err
			}
			_ = f.Close()
			defer os.Remove(f.Name())
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "progress"},
		func(ctx context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
				}); err != nil {
					return nil, nil, err
				}
				// The work of the step. (Notifications that arrive after
				// the result are dropped by the client; see the package doc.)
				time.Sleep(20 * time.Millisecond)
			}
			return text("progressed"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "big"},
		func(_ context.Context, _ *sdk.CallToolRequest, in bigIn) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "intents"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			res := text("intents")
			res.Meta = sdk.Meta{mcp.MetaIntents: []any{
				map[string]any{"type": "toolwire.test.first", "payload": map[string]any{"n": 1}},
				map[string]any{"type": "toolwire.test.second", "payload": map[string]any{"n": 2}},
			}}
			return res, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail"},
		func(_ context.Context, _ *sdk.CallToolRequest, in failIn) (*sdk.CallToolResult, any, error) {
			switch in.Type {
			case "invalid_params":
				return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad value"}
			case "method_not_found":
				return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no such thing"}
			case "internal":
				return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug"}
			case "permanent":
				res := text("it failed")
				res.IsError = true
				return res, nil, nil
			}
			// Typed through the _meta convention: "rate_limit" -> RATE_LIMIT.
			res := text("failed as " + in.Type)
			res.IsError = true
			res.Meta = sdk.Meta{mcp.MetaError: map[string]any{"type": strings.ToUpper(in.Type), "retryAfterMs": 1500, "suggestion": "wait"}}
			return res, nil, nil
		})
	if o.panics {
		sdk.AddTool(srv, &sdk.Tool{Name: "panic"},
			func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
				panic("fixture panic")
			})
	}
	// The fields the mapping must keep (fields_test.go).
	sdk.AddTool(srv, &sdk.Tool{Name: "annotated"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return annotatedResult(), nil, nil
		})
	sdk.AddTool(srv, decoratedTool(), func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
		return text("decorated"), nil, nil
	})
	for _, name := range []string{"task_only", "task_optional"} {
		sdk.AddTool(srv, &sdk.Tool{Name: name}, func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return text(name + " called without a task"), nil, nil
		})
	}
	srv.AddTool(versionedTool(o.variant), func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("versioned " + o.variant), nil
	})
	return srv
}

// versionedTool is a tool whose definition depends on variant.
func versionedTool(variant string) *sdk.Tool {
	schema := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}
	if variant == "v2" {
		schema["properties"].(map[string]any)["command"] = map[string]any{"type": "string"}
	}
	return &sdk.Tool{Name: "versioned", Description: "Reads a file (" + variant + ").", InputSchema: schema}
}

// fixtureFail is the Subject.Fail table of the fixture's fail tool.
var fixtureFail = map[string]toolwirev1.ErrorType{
	"invalid_params":   toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
	"method_not_found": toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
	"internal":         toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
	"permanent":        toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
	"rate_limit":       toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT,
	"transient":        toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
}

// running reports whether a block call's handler runs (a marker file in
// dir).
func running(dir string) func() bool {
	return func() bool {
		ents, err := os.ReadDir(dir)
		return err == nil && len(ents) > 0
	}
}

// stdioServer is the configuration of the test binary as a stdio fixture
// server.
func stdioServer(t testing.TB, name string, env map[string]string) mcp.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	set := map[string]string{envFixture: "stdio"}
	for k, v := range env {
		set[k] = v
	}
	return mcp.ServerConfig{Name: name, Stdio: &mcp.StdioConfig{Command: exe, SetEnv: set}, Required: true}
}

// httpServer serves a fixture server over streamable HTTP on a test
// server; it stops at the end of the test.
func httpServer(t testing.TB, srv *sdk.Server) string {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		closeSessions(srv)
	})
	return ts.URL
}

// closeSessions ends the server-side sessions a stopped HTTP server still
// holds (clients that never said goodbye).
func closeSessions(srv *sdk.Server) {
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}

// testConfig is a Config with short backoffs for tests.
func testConfig(servers ...mcp.ServerConfig) mcp.Config {
	return mcp.Config{
		Servers:           servers,
		ConnectTimeout:    mcp.Duration(20 * time.Second),
		SessionWait:       mcp.Duration(20 * time.Second),
		MinBackoff:        mcp.Duration(20 * time.Millisecond),
		MaxBackoff:        mcp.Duration(500 * time.Millisecond),
		TerminateDuration: mcp.Duration(500 * time.Millisecond),
	}
}

// newExecutor starts an executor closed at the end of the test.
func newExecutor(t testing.TB, cfg mcp.Config, opts mcp.Options) *mcp.Executor {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	// New's context bounds the start-up only.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e, err := mcp.New(ctx, cfg, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	return e
}

// specsByTool maps the executor's specs by MCP tool name.
func specsByTool(e *mcp.Executor) map[string]*toolwirev1.ToolSpec {
	m := map[string]*toolwirev1.ToolSpec{}
	for _, s := range e.Specs() {
		m[s.GetMcp().GetTool()] = s
	}
	return m
}

// testLogger logs to the test's log, at Debug when -v.
// testLogger logs into the test's output with -v; without it, a failed
// test's output gets the first warnings and errors the executor logged
// (the cause of a TRANSIENT answer is only in the log: a CI failure of
// TestSessionsWaitForRoom could not be diagnosed without it).
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if t.Failed() && len(w.warned) > 0 {
			t.Logf("the executor's warnings and errors:\n%s", strings.Join(w.warned, "\n"))
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	warned []string // the first maxWarned WARN and ERROR lines, without -v
}

const maxWarned = 20

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := strings.TrimRight(string(p), "\n")
	if testing.Verbose() {
		w.t.Log(line)
	} else if len(w.warned) < maxWarned && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
		w.warned = append(w.warned, line)
	}
	return len(p), nil
}

// tempDir is a short temporary directory (marker files, pid files).
func tempDir(t testing.TB) string {
	t.Helper()
	return filepath.Clean(t.TempDir())
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = logtest.Buffer

// bufferLogger logs text at debug level into b.
func bufferLogger(b *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// fixtureIcons are icons of the decorated tool and the annotated result's
// resource link.
var fixtureIcons = []sdk.Icon{
	{Source: "https://toolwire.example/icon.png", MIMEType: "image/png", Sizes: []string{"48x48", "96x96"}, Theme: sdk.IconThemeLight},
	{Source: "data:image/svg+xml;base64,PHN2Zy8+", Sizes: []string{"any"}},
}

// annotatedResult is the result of the annotated tool: annotations with
// priority 0 (the text "priority:0 ..."; the SDK cannot send that 0,
// decorate adds it) and 0.5, a resource link with icons, and a result
// _meta.
func annotatedResult() *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Meta: sdk.Meta{"acme/trace": "t-1", "acme/nested": map[string]any{"list": []any{1, "two", nil}}},
		Content: []sdk.Content{
			&sdk.TextContent{Text: "priority:0 least important", Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}}},
			&sdk.TextContent{Text: "half", Annotations: &sdk.Annotations{Priority: 0.5}},
			&sdk.TextContent{Text: "priority:0 and nothing else"},
			&sdk.ResourceLink{URI: "file:///toolwire/link.txt", Name: "link.txt", Icons: fixtureIcons},
		},
	}
}

// decoratedTool has a _meta and icons.
func decoratedTool() *sdk.Tool {
	return &sdk.Tool{Name: "decorated", Icons: fixtureIcons,
		Meta: sdk.Meta{"acme/ui": map[string]any{"widget": "table", "rows": 3}}}
}

// decorate adds to a server's results what the SDK's types cannot say:
// the execution.taskSupport of the task_* tools in tools/list ("required"
// and "optional"), and priority 0 in the annotations of the text blocks
// that start with "priority:0".
func decorate(msg jsonrpc.Message) jsonrpc.Message {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || len(resp.Result) == 0 {
		return msg
	}
	var res map[string]any
	if json.Unmarshal(resp.Result, &res) != nil {
		return msg
	}
	changed := false
	tools, _ := res["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		switch m["name"] {
		case "task_only":
			m["execution"], changed = map[string]any{"taskSupport": "required"}, true
		case "task_optional":
			m["execution"], changed = map[string]any{"taskSupport": "optional"}, true
		}
	}
	content, _ := res["content"].([]any)
	for _, c := range content {
		m, _ := c.(map[string]any)
		if s, _ := m["text"].(string); strings.HasPrefix(s, "priority:0") {
			ann, _ := m["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
			}
			ann["priority"] = 0
			m["annotations"], changed = ann, true
		}
	}
	if !changed {
		return msg
	}
	b, err := json.Marshal(res)
	if err != nil {
		return msg
	}
	out := *resp
	out.Result = b
	return &out
}

// decoratingTransport decorates what a stdio server writes.
type decoratingTransport struct{ sdk.Transport }

func (t decoratingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return decoratingConn{c}, nil
}

type decoratingConn struct{ sdk.Connection }

func (c decoratingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	return c.Connection.Write(ctx, decorate(msg))
}

// decoratedHTTPServer serves srv over streamable HTTP (answers as JSON
// bodies or as server-sent events) with its POST answers decorated; it
// stops at the end of the test.
func decoratedHTTPServer(t testing.TB, srv *sdk.Server, jsonResponse bool) string {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		switch rec.Header().Get("Content-Type") {
		case "application/json":
			if msg, err := jsonrpc.DecodeMessage(body); err == nil {
				if b, err := jsonrpc.EncodeMessage(decorate(msg)); err == nil {
					body = b
				}
			}
		case "text/event-stream":
			lines := strings.Split(string(body), "\n")
			for i, l := range lines {
				data, ok := strings.CutPrefix(l, "data: ")
				if !ok {
					continue
				}
				if msg, err := jsonrpc.DecodeMessage([]byte(data)); err == nil {
					if b, err := jsonrpc.EncodeMessage(decorate(msg)); err == nil {
						lines[i] = "data: " + string(b)
					}
				}
			}
			body = []byte(strings.Join(lines, "\n"))
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		closeSessions(srv)
	})
	return ts.URL
}
