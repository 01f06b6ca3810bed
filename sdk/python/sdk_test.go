// Package python_test runs the Python client's tests (sdk/python/tests)
// with the machine's python3 against a real stack (internal/sdkstack): an
// embedded JetStream server, a dispatcher with its Connect API on loopback
// behind API keys, approval token keys and a policy (a deny rule, an ask
// rule, a rate limit), and a worker serving the built-in tools and the
// SDK tests' tools.
// With CI=true a missing python3 is a failure, not a skip.
package python_test

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/sdkstack"
	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// python3 returns the interpreter's path (TOOLWIRE_PYTHON, e.g. a
// python3.9 to check the oldest version supported, or python3 from PATH),
// or ends the test (a failure under CI=true).
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath(cmp.Or(os.Getenv("TOOLWIRE_PYTHON"), "python3"))
	if err != nil {
		testdeps.Missing(t, "install Debian's python3", "python3 not found: %v", err)
	}
	return py
}

// TestPythonClient runs `python3 -m unittest` in sdk/python against a
// real stack; the scenarios are the Python tests (tests/test_*.py). After
// it, the cancellation the Python test asked for must have reached the
// worker's tool.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	py := python3(t)
	s := sdkstack.Start(t, "pytest", "py")
	agent, approver, cancelled := s.AgentKey, s.ApproverKey, s.Cancelled

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Env = append(os.Environ(), "TOOLWIRE_URL="+s.URL, "TOOLWIRE_API_KEY="+agent,
		"TOOLWIRE_APPROVER_KEY="+approver, "PYTHONDONTWRITEBYTECODE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("python3 -m unittest:\n%s", out.String())
	require.NoError(t, err, "the Python client's tests failed (output above)")
	require.Contains(t, out.String(), "OK")
	require.False(t, strings.Contains(out.String(), "skipped"), "no Python test may be skipped against a stack")
	require.False(t, strings.Contains(out.String(), "ResourceWarning"), "a Python test left a socket or file open")
	require.GreaterOrEqual(t, cancelled.Load(), int32(1), "the cancel the Python test sent never reached the hold tool")

	// The bench script, small, so that it keeps working (the figures of
	// BENCHMARKS.md come from a longer run without the race detector).
	args := []string{"bench.py", "--calls", "200", "--concurrency", "8"}
	if v := os.Getenv("TOOLWIRE_PY_BENCH"); v != "" { // e.g. "--calls 5000 --concurrency 16"
		args = append(args, strings.Fields(v)...)
		goBench(t, s.URL, agent, strings.Fields(v))
	}
	bench := exec.CommandContext(ctx, py, args...)
	bench.Env = cmd.Env
	b, err := bench.CombinedOutput()
	require.NoError(t, err, "bench.py:\n%s", b)
	require.Equal(t, 2, strings.Count(string(b), "FIGURE python-"), "bench.py:\n%s", b)
	t.Logf("%s", b)
}

// TestPipInstall installs the package as a user would, `pip install
// ./sdk/python`, with no package index (the in-tree build backend needs
// nothing), into a temporary directory, and imports it from there.
func TestPipInstall(t *testing.T) {
	t.Parallel()
	py := python3(t)
	if out, err := exec.Command(py, "-m", "pip", "--version").CombinedOutput(); err != nil {
		testdeps.Missing(t, "install pip for python3", "python3 -m pip: %v\n%s", err, out)
	}
	target := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	src, err := filepath.Abs(".")
	require.NoError(t, err)
	install := exec.CommandContext(ctx, py, "-m", "pip", "install", "--no-index", "--no-cache-dir",
		"--disable-pip-version-check", "--target", target, src)
	install.Env = append(os.Environ(), "PIP_NO_INPUT=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := install.CombinedOutput()
	require.NoError(t, err, "pip install ./sdk/python:\n%s", out)

	check := exec.CommandContext(ctx, py, "-c", "import toolwire, sys; sys.stdout.write(toolwire.__file__ + ' ' + toolwire.__version__)")
	check.Dir = target // not the source directory: the installed copy is imported
	check.Env = append(os.Environ(), "PYTHONPATH="+target, "PYTHONDONTWRITEBYTECODE=1")
	out, err = check.CombinedOutput()
	require.NoError(t, err, "import the installed package:\n%s", out)
	require.Equal(t, filepath.Join(target, "toolwire", "__init__.py")+" 0.1.0", string(out))
}

// goBench makes the bench's calls with the Go client (pkg/client, binary
// protobuf and protobuf JSON) on the same stack, for the figure the
// Python client's is compared with; args are bench.py's flags
// (--calls N, --concurrency C, in any order, "--calls=N" too).
func goBench(t *testing.T, url, key string, args []string) {
	t.Helper()
	fs := flag.NewFlagSet("bench.py", flag.ContinueOnError)
	calls := fs.Int("calls", 200, "calls to make")
	concurrency := fs.Int("concurrency", 8, "calls in flight")
	require.NoError(t, fs.Parse(args), "TOOLWIRE_PY_BENCH")
	sdkstack.GoBench(t, url, key, *calls, *concurrency)
}
