package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// statefulServer is a Go SDK server whose state lives in its MCP
// sessions, as a stateful upstream server's does: "bump" counts the calls
// of the session it is called on and answers the count; "hold" runs
// until release is closed (or its call is cancelled), after sending on
// entered.
type statefulServer struct {
	srv      *sdk.Server
	entered  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	counts   map[*sdk.ServerSession]int
	sessions map[*sdk.ServerSession]bool // every session that called a tool
}

func newStatefulServer() *statefulServer {
	s := &statefulServer{
		srv:      sdk.NewServer(&sdk.Implementation{Name: "stateful", Version: "1"}, nil),
		entered:  make(chan struct{}, 16),
		release:  make(chan struct{}),
		counts:   map[*sdk.ServerSession]int{},
		sessions: map[*sdk.ServerSession]bool{},
	}
	sdk.AddTool(s.srv, &sdk.Tool{Name: "bump", Description: "Counts the calls of this MCP session."},
		func(_ context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			s.mu.Lock()
			s.counts[req.Session]++
			s.sessions[req.Session] = true
			n := s.counts[req.Session]
			s.mu.Unlock()
			return text(strconv.Itoa(n)), nil, nil
		})
	sdk.AddTool(s.srv, &sdk.Tool{Name: "hold", Description: "Runs until released."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			s.mu.Lock()
			s.sessions[req.Session] = true
			s.mu.Unlock()
			s.entered <- struct{}{}
			select {
			case <-s.release:
				return text("released"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	return s
}

// open is the number of the server's sessions that called a tool and are
// still open.
func (s *statefulServer) open() int {
	live := map[*sdk.ServerSession]bool{}
	for ss := range s.srv.Sessions() {
		live[ss] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ss := range s.sessions {
		if live[ss] {
			n++
		}
	}
	return n
}

// waitOpen polls until the server has n open calling sessions.
func (s *statefulServer) waitOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server has %d open calling sessions, want %d", s.open(), n)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// statefulExecutor serves s over streamable HTTP to an executor whose
// server has the given session fields.
func statefulExecutor(t *testing.T, s *statefulServer, sc mcp.ServerConfig) (*mcp.Executor, map[string]*toolwirev1.ToolSpec) {
	t.Helper()
	return statefulExecutorWait(t, s, sc, 0)
}

// statefulExecutorWait is statefulExecutor with Config.SessionWait set to
// wait (unless zero).
func statefulExecutorWait(t *testing.T, s *statefulServer, sc mcp.ServerConfig, wait time.Duration) (*mcp.Executor, map[string]*toolwirev1.ToolSpec) {
	t.Helper()
	sc.Name, sc.HTTP, sc.Required = "stateful", &mcp.HTTPConfig{URL: httpServer(t, s.srv)}, true
	cfg := testConfig(sc)
	if wait > 0 {
		cfg.SessionWait = mcp.Duration(wait)
	}
	e := newExecutor(t, cfg, mcp.Options{})
	return e, specsByTool(e)
}

// callAs runs spec through e as a call of tenant in session (the Caller
// fields the dispatcher sets).
func callAs(ctx context.Context, e *mcp.Executor, spec *toolwirev1.ToolSpec, tenant, session string) (*tool.Result, error) {
	return e.Execute(ctx, &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "c", Tool: spec.GetName(), Arguments: []byte(`{}`), Attempt: 1,
			Caller: &toolwirev1.Caller{Tenant: tenant, Session: session}},
		Spec: spec,
	})
}

// bump calls bump as tenant in session and returns its count.
func bump(t *testing.T, e *mcp.Executor, specs map[string]*toolwirev1.ToolSpec, tenant, session string) string {
	t.Helper()
	res, err := callAs(t.Context(), e, specs["bump"], tenant, session)
	require.NoError(t, err)
	return res.Content[0].GetText().GetText()
}

// TestSessionsIsolateTenantsByDefault: a stateful server's per-session
// state made by tenant A is not seen by tenant B under the default
// (per_tenant); under "shared" it is (the behaviour before).
func TestSessionsIsolateTenantsByDefault(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		s := newStatefulServer()
		e, specs := statefulExecutor(t, s, mcp.ServerConfig{})
		require.Equal(t, "1", bump(t, e, specs, "acme", "s1"))
		require.Equal(t, "2", bump(t, e, specs, "acme", "s2"), "one session per tenant: the tenant's sessions share it")
		require.Equal(t, "1", bump(t, e, specs, "globex", "s1"), "tenant B does not see tenant A's state")
		require.Equal(t, "3", bump(t, e, specs, "acme", ""))
		s.waitOpen(t, 2)
	})
	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		s := newStatefulServer()
		e, specs := statefulExecutor(t, s, mcp.ServerConfig{Sessions: mcp.SessionsShared})
		require.Equal(t, "1", bump(t, e, specs, "acme", "s1"))
		require.Equal(t, "2", bump(t, e, specs, "globex", "s1"), "shared: tenant B sees tenant A's state")
		s.waitOpen(t, 1)
	})
	t.Run("per_session", func(t *testing.T) {
		t.Parallel()
		s := newStatefulServer()
		e, specs := statefulExecutor(t, s, mcp.ServerConfig{Sessions: mcp.SessionsPerSession})
		require.Equal(t, "1", bump(t, e, specs, "acme", "s1"))
		require.Equal(t, "2", bump(t, e, specs, "acme", "s1"))
		require.Equal(t, "1", bump(t, e, specs, "acme", "s2"), "another session of the tenant has its own")
		require.Equal(t, "1", bump(t, e, specs, "globex", "s1"), "the same session id in another tenant is another session")
		require.Equal(t, "1", bump(t, e, specs, "acme", ""), "calls without a session share their tenant's")
		require.Equal(t, "2", bump(t, e, specs, "acme", ""))
		s.waitOpen(t, 4)
	})
}

// TestSessionsIdleClosed: a caller session without calls for
// session_idle is closed (on the server too); the next call opens a new
// one, its state gone.
func TestSessionsIdleClosed(t *testing.T) {
	t.Parallel()
	s := newStatefulServer()
	e, specs := statefulExecutor(t, s, mcp.ServerConfig{SessionIdle: mcp.Duration(100 * time.Millisecond)})
	require.Equal(t, "1", bump(t, e, specs, "acme", ""))
	require.Equal(t, "1", bump(t, e, specs, "globex", ""))
	s.waitOpen(t, 0)
	require.Equal(t, "1", bump(t, e, specs, "acme", ""), "a new session after the idle one closed")
}

// TestSessionsCapped: a server has at most max_sessions caller sessions;
// when all have calls in flight for session_wait a call of another
// tenant is refused OVERLOADED with no side effects, and once one is idle
// it is closed for the newcomer (least recently used first).
func TestSessionsCapped(t *testing.T) {
	t.Parallel()
	s := newStatefulServer()
	e, specs := statefulExecutorWait(t, s, mcp.ServerConfig{MaxSessions: 2}, 300*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, tenant := range []string{"a", "b"} {
		wg.Go(func() {
			_, err := callAs(t.Context(), e, specs["hold"], tenant, "")
			errs <- err
		})
	}
	<-s.entered
	<-s.entered
	_, err := callAs(t.Context(), e, specs["bump"], "c", "")
	te := tool.AsError(t.Context(), err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, te.Type, "%v", err)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
	require.True(t, te.Retryable)
	require.Equal(t, 2, s.open())

	close(s.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, "1", bump(t, e, specs, "c", ""), "an idle session made room")
	require.Equal(t, "1", bump(t, e, specs, "d", ""))
	s.waitOpen(t, 2)
	require.Equal(t, "2", bump(t, e, specs, "d", ""), "the newest sessions stayed")
}

// TestSessionsStdioProcesses: for a stdio server a caller session is a
// process of its own, capped by max_sessions (evicting the least
// recently used idle one); Close ends them all (goleak checks the rest).
func TestSessionsStdioProcesses(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	sc := stdioServer(t, "proc", map[string]string{envCounter: "1", envPIDFile: dir + "/pid"})
	sc.MaxSessions = 1
	e := newExecutor(t, testConfig(sc), mcp.Options{})
	specs := specsByTool(e)
	discovery := readPID(t, dir+"/pid", 0)
	require.Equal(t, "1", bump(t, e, specs, "acme", ""))
	acme := readPID(t, dir+"/pid", discovery)
	require.Equal(t, "2", bump(t, e, specs, "acme", ""))
	require.Equal(t, "1", bump(t, e, specs, "globex", ""), "another tenant, another process")
	readPID(t, dir+"/pid", acme)
	waitDead(t, acme, "the evicted session's process")
	require.True(t, alive(discovery), "the discovery session's process stays")
	require.Equal(t, "1", bump(t, e, specs, "acme", ""), fmt.Sprintf("acme's process %d was closed", acme))

	// A session's process killed from outside is replaced at the next call.
	crashed := readPID(t, dir+"/pid", acme)
	require.NoError(t, syscall.Kill(crashed, syscall.SIGKILL))
	waitDead(t, crashed, "the killed session's process")
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := callAs(t.Context(), e, specs["bump"], "acme", "")
		if err == nil {
			require.Equal(t, "1", res.Content[0].GetText().GetText(), "a new process")
			break
		}
		// The call may reach the dying session before its end is seen:
		// TRANSIENT, as any call on a lost connection.
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, tool.AsError(t.Context(), err).Type, "%v", err)
		require.False(t, time.Now().After(deadline), "no new session: %v", err)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	require.True(t, alive(discovery), "the discovery session's process stays")
}

// TestSessionsEverythingToggle: the reference server's
// toggle-simulated-logging keeps its on/off state per MCP session (over
// streamable HTTP by session id; over stdio a session is a process).
// Under the default, tenant B's first toggle starts its own logging
// whatever tenant A did; under "shared" it stops A's.
func TestSessionsEverythingToggle(t *testing.T) {
	t.Parallel()
	node, index := everything(t)
	url := startEverythingHTTP(t, node, index)
	stdio := &mcp.StdioConfig{Command: node, Args: []string{index, "stdio"}, Dir: filepath.Dir(index)}
	for _, tt := range []struct {
		name   string
		sc     mcp.ServerConfig
		second string // what tenant B's first toggle answers
	}{
		{"http default", mcp.ServerConfig{HTTP: &mcp.HTTPConfig{URL: url}}, "Started"},
		{"http shared", mcp.ServerConfig{HTTP: &mcp.HTTPConfig{URL: url}, Sessions: mcp.SessionsShared}, "Stopped"},
		{"stdio default", mcp.ServerConfig{Stdio: stdio}, "Started"},
		{"stdio shared", mcp.ServerConfig{Stdio: stdio, Sessions: mcp.SessionsShared}, "Stopped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.sc.Name, tt.sc.Required = "everything", true
			e := newExecutor(t, testConfig(tt.sc), mcp.Options{})
			toggle := specsByTool(e)["toggle-simulated-logging"]
			require.NotNil(t, toggle)
			first := func(tenant string) string {
				res, err := callAs(t.Context(), e, toggle, tenant, "")
				require.NoError(t, err)
				return strings.Fields(res.Content[0].GetText().GetText())[0]
			}
			require.Equal(t, "Started", first("acme"))
			require.Equal(t, tt.second, first("globex"))
		})
	}
}
