// Package pythontool_test runs the example of a tool written in Python
// (server.py, an MCP server over stdio on the standard library) served to
// the fleet by a worker built from the example's worker.yaml.
package pythontool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
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
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
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

// TestServerSurvivesBadInput feeds server.py requests a broken or hostile
// client could send: each request is answered (an error where it is
// malformed), a JSON-RPC response is not answered, initialize answers a
// version the server speaks, progress is reported when asked, and the
// server exits cleanly at the end of its input, never on a bad line.
func TestServerSurvivesBadInput(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"word_stats","arguments":{"text":"a","top":"x"},"_meta":"y"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"word_stats","arguments":{"text":"a b a"},"_meta":{"progressToken":"p"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":7}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"word_stats","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter(t), "server.py")
	cmd.Stdin = strings.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "server.py ended on bad input: %s", stderr.String())

	type msg struct {
		ID     *int                `json:"id"`
		Method string              `json:"method"`
		Result json.RawMessage     `json:"result"`
		Error  *struct{ Code int } `json:"error"`
	}
	byID := map[int]msg{}
	progress := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m msg
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m.Method == "notifications/progress" {
			progress++
			continue
		}
		require.NotNil(t, m.ID, line)
		byID[*m.ID] = m
	}
	require.Len(t, byID, 7, "every request but the response (id 3) answered: %s", out)
	for _, id := range []int{1, 6, 7} {
		require.NotNil(t, byID[id].Error, "request %d answered with an error", id)
	}
	require.Contains(t, string(byID[2].Result), `"isError":true`)
	require.Contains(t, string(byID[4].Result), `"protocolVersion":"2025-06-18"`)
	require.Contains(t, string(byID[8].Result), `"protocolVersion":"2025-03-26"`)
	require.Contains(t, string(byID[5].Result), `"words":3`)
	require.Equal(t, 1, progress)
}

// interpreter is the real path of python3 (not a shim that needs PATH),
// or of TOOLWIRE_PYTHON when set; or the test ends (a failure under CI=true).
func interpreter(t *testing.T) string {
	t.Helper()
	name := "python3"
	if v := os.Getenv("TOOLWIRE_PYTHON"); v != "" {
		name = v
	}
	py, err := exec.LookPath(name)
	if err != nil {
		testdeps.Missing(t, "install Debian's python3", "python3 not found: %v", err)
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
