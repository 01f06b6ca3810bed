package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// readPID polls path until it holds a pid other than not.
func readPID(t *testing.T, path string, not int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != not {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces, so look after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// TestCrashedServerRestarts: a stdio server killed from outside is
// restarted with backoff (its whole process group cleaned up), calls
// succeed again, and Close kills the current server's process group.
func TestCrashedServerRestarts(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(tempDir(t), "pid")
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	sc := stdioServer(t, "crashy", map[string]string{envPIDFile: pidFile, envChild: sleep})
	sc.Sessions = mcp.SessionsShared // one process: the one in the pid file (see TestSessionsStdioProcesses)
	cfg := testConfig(sc)
	e, err := mcp.New(t.Context(), cfg, mcp.Options{Logger: testLogger(t)})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = e.Close(context.Background())
		}
	})
	echo := specsByTool(e)["echo"]
	res, err := execute(e, echo, `{"text":"before"}`)
	require.NoError(t, err)
	require.Equal(t, "before", res.Content[0].GetText().GetText())

	first := readPID(t, pidFile, 0)
	firstGrandchild := readPID(t, pidFile+".grandchild", 0)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	second := readPID(t, pidFile, first)
	waitDead(t, firstGrandchild, "the crashed server's grandchild")

	res, err = execute(e, echo, `{"text":"after"}`)
	require.NoError(t, err)
	require.Equal(t, "after", res.Content[0].GetText().GetText())

	secondGrandchild := readPID(t, pidFile+".grandchild", firstGrandchild)
	start := time.Now()
	require.NoError(t, e.Close(t.Context()))
	closed = true
	require.Less(t, time.Since(start), 5*time.Second, "closing does not wait for the SDK's default 5s")
	waitDead(t, second, "the server")
	waitDead(t, secondGrandchild, "the server's grandchild")
}

// TestLateServer: a server that cannot start is not fatal unless
// required; it is retried in the background and its tools appear once it
// comes up.
func TestLateServer(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := filepath.Join(tempDir(t), "server")
	late := stdioServer(t, "late", nil)
	late.Stdio.Command = cmd // not there yet
	late.Required = false

	required := late
	required.Required = true
	_, err = mcp.New(t.Context(), testConfig(required), mcp.Options{Logger: testLogger(t)})
	require.ErrorContains(t, err, "required server late")

	e := newExecutor(t, testConfig(late), mcp.Options{})
	require.Empty(t, e.Specs())
	require.NoError(t, os.Symlink(exe, cmd))
	select {
	case <-e.Changed():
	case <-time.After(20 * time.Second):
		t.Fatal("the late server's tools never appeared")
	}
	require.NotNil(t, specsByTool(e)["echo"])
	res, err := execute(e, specsByTool(e)["echo"], `{"text":"late"}`)
	require.NoError(t, err)
	require.Equal(t, "late", res.Content[0].GetText().GetText())
}

// TestHTTPServerRestarts: when a streamable HTTP server restarts (its
// connections are cut and its sessions are gone), the executor opens a new
// session and calls succeed again. The restart keeps the listening socket:
// a port given up and bound again may be taken in between by any process
// on the machine (a CI run lost it once), and the client cannot tell a new
// process from a new server behind the same socket.
func TestHTTPServerRestarts(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[sdk.Server]
	serverFor := func(*http.Request) *sdk.Server { return current.Load() }
	var handler atomic.Pointer[http.Handler]
	start := func() {
		srv := newFixtureServer(fixtureOptions{running: tempDir(t)})
		h := http.Handler(sdk.NewStreamableHTTPHandler(serverFor, nil))
		current.Store(srv)
		handler.Store(&h)
		t.Cleanup(func() { closeSessions(srv) })
	}
	start()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "web", HTTP: &mcp.HTTPConfig{URL: ts.URL}, Required: true}), mcp.Options{})
	echo := specsByTool(e)["echo"]
	_, err := execute(e, echo, `{"text":"one"}`)
	require.NoError(t, err)

	// The restart: a new server with no sessions, every connection cut.
	old := current.Load()
	start()
	ts.CloseClientConnections()
	closeSessions(old)

	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := execute(e, echo, `{"text":"two"}`)
		if err == nil {
			require.Equal(t, "two", res.Content[0].GetText().GetText())
			return
		}
		te := tool.AsError(context.Background(), err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type, "%v", err)
		require.True(t, te.Retryable)
		if time.Now().After(deadline) {
			t.Fatalf("calls never succeeded after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
