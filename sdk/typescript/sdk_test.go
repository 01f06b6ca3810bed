// Package typescript_test runs the TypeScript client's tests
// (sdk/typescript/test, `node --test`) with the machine's node against a
// real stack (internal/sdkstack, the one the Python client's tests run
// against): an embedded JetStream server, a dispatcher with its Connect API
// on loopback behind API keys, approval token keys and a policy (a deny
// rule, an ask rule, a rate limit), and a worker serving the built-in tools
// and the SDK tests' tools. The tests import the checked-in dist/, so no
// build step runs here; the runtime dependencies come from the lockfile
// (make ts-sdk). With CI=true a missing node or node_modules is a failure,
// not a skip.
package typescript_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/sdkstack"
	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// node returns node's path (TOOLWIRE_NODE, e.g. the Node 22 of
// testdata/mcp-clients, or node from PATH) after checking that the SDK's
// dependencies are installed, or ends the test (a failure under CI=true).
func node(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath(cmp.Or(os.Getenv("TOOLWIRE_NODE"), "node"))
	if err != nil {
		testdeps.Missing(t, "install Node.js 20 or later", "node not found: %v", err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@connectrpc", "connect-node", "package.json")); err != nil {
		testdeps.Missing(t, "run `make ts-sdk` (npm ci in sdk/typescript)", "the SDK's dependencies are not installed: %v", err)
	}
	return path
}

// counts reads node --test's summary ("# pass N", "# skipped N", ...).
func counts(t *testing.T, out string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$`).FindAllStringSubmatch(out, -1) {
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		got[m[1]] = n
	}
	require.Contains(t, got, "pass", "node --test printed no summary:\n%s", out)
	return got
}

// TestTypeScriptClient runs `node --test` in sdk/typescript against a real
// stack; the scenarios are the TypeScript tests (test/*.test.mjs). After
// it, the cancellations the tests asked for (Cancel, and an AbortSignal)
// must have reached the worker's tool.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	bin := node(t)
	s := sdkstack.Start(t, "tstest", "ts")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	files, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	cmd := command(ctx, bin, append([]string{"--test", "--test-reporter=tap", "--test-timeout=120000"}, files...)...)
	cmd.Env = append(os.Environ(), "TOOLWIRE_URL="+s.URL, "TOOLWIRE_API_KEY="+s.AgentKey,
		"TOOLWIRE_APPROVER_KEY="+s.ApproverKey, "NODE_OPTIONS=", "OPENAI_AGENTS_DISABLE_TRACING=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node --test:\n%s", out.String())
	require.NoError(t, err, "the TypeScript client's tests failed (output above)")
	n := counts(t, out.String())
	require.Zero(t, n["fail"], "failed tests")
	require.Zero(t, n["skipped"], "no TypeScript test may be skipped against a stack")
	require.Zero(t, n["cancelled"], "cancelled tests")
	require.GreaterOrEqual(t, n["pass"], 35)
	require.GreaterOrEqual(t, s.Cancelled.Load(), int32(2), "the Cancel and the abort the TypeScript tests sent did not both reach the hold tool")
	// The adapters' approved deploys ran once each; the rejected ones never.
	for name, want := range map[string]int{"ai-once": 1, "agents-once": 1, "agents-resumed": 1, "ai-rejected": 0, "agents-rejected": 0} {
		require.Equal(t, want, s.Deploys.Of(name), "runs of deploy %q", name)
	}

	// The bench script, small, so that it keeps working (the figures of
	// BENCHMARKS.md come from a longer run without the race detector).
	calls, conc := 200, 8
	if v := os.Getenv("TOOLWIRE_TS_BENCH"); v != "" { // calls and concurrency, e.g. "5000 64"
		_, err := fmt.Sscan(v, &calls, &conc)
		require.NoError(t, err, "TOOLWIRE_TS_BENCH: want calls and concurrency, e.g. \"5000 64\"")
		sdkstack.GoBench(t, s.URL, s.AgentKey, calls, conc)
	}
	bench := command(ctx, bin, "bench.mjs", "--calls", strconv.Itoa(calls), "--concurrency", strconv.Itoa(conc))
	bench.Env = cmd.Env
	b, err := bench.CombinedOutput()
	require.NoError(t, err, "bench.mjs:\n%s", b)
	require.Equal(t, 2, strings.Count(string(b), "FIGURE typescript-"), "bench.mjs:\n%s", b)
	t.Logf("%s", b)
}

// command is node with args in its own process group, killed as a group
// when ctx ends (node --test runs each file in a child process, which
// would otherwise outlive the parent and hold its output open), and never
// waited for more than 5s after that.
func command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
