// Package pythontool_test runs the example of a tool written in Python
// (server.py, an MCP server over stdio on the standard library) served to
// the fleet by a worker built from the example's worker.yaml.
package pythontool_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestPythonToolServesTheFleet starts a worker from worker.yaml (its MCP
// server is `python3 server.py`), waits for the tool to be registered as
// mcp__pytools__word_stats, and calls it through a dispatcher: a result
// with the structured output the Python code computed, and arguments its
// input schema refuses answered VALIDATION at admission.
func TestPythonToolServesTheFleet(t *testing.T) {
	t.Parallel()
	python := interpreter(t)
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})

	f, err := workerconfig.Load("worker.yaml")
	require.NoError(t, err)
	require.Len(t, f.MCP.Servers, 1)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	// The worker passes no PATH to the server: name the interpreter by its
	// path, and run from the repository's root as the file says.
	f.MCP.Servers[0].Stdio.Command, f.MCP.Servers[0].Stdio.Dir = python, root

	b := s.Env.Open(t, "python-tool-worker")
	w, err := workerconfig.NewWorker(t.Context(), b, f, workerconfig.Options{Registry: registry.NewRegistrar(b, nil, nil, ""),
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	s.WaitTool(t, "mcp__pytools__word_stats")

	resp, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
		Tool: "mcp__pytools__word_stats", ArgumentsJson: `{"text":"the cat and the hat\nthe end","top":1}`,
		Wait: durationpb.New(30 * time.Second),
	}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
	r := resp.Msg.Response
	require.True(t, r.Ok, "%v", r.Error)
	require.JSONEq(t, `{"words":7,"lines":2,"top":["the"]}`, r.StructuredJson)
	require.Equal(t, "7 words, 2 lines; top: the", r.Content[0].GetText().GetText())
	require.Equal(t, "worker", r.Meta.Source)

	resp, err = s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
		Tool: "mcp__pytools__word_stats", ArgumentsJson: `{"text":7}`,
	}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, resp.Msg.Response.GetError().GetType())
}

// interpreter is the real path of python3 (not a shim that needs PATH),
// or the test ends (a failure under CI=true).
func interpreter(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testdeps.Missing(t, "install Debian's python3", "python3 not found: %v", err)
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
