// Package python_test runs the Python client's tests (sdk/python/tests)
// with the machine's python3 against a real stack: an embedded JetStream
// server, a dispatcher with its Connect API on loopback behind API keys,
// approval token keys and a policy (a deny rule, an ask rule, a rate
// limit), and a worker serving the built-in tools and the tools below.
// With CI=true a missing python3 is a failure, not a skip.
package python_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// policy is the installation policy of the stack: the Python tests'
// scenarios each meet one of its rules.
const policy = `
tenant:
  default: allow
  rules:
    - id: no-secrets
      effect: deny
      tools: [echo]
      args: {text: "secret*"}
      reason: secrets are never echoed
    - id: deploys-ask
      effect: ask
      tools: [deploy]
      reason: deploys need a human
limits:
  - id: ping-rate
    key: agent
    tools: [ping]
    rate: {count: 1, per: 1h, burst: 1}
    reason: one ping an hour
`

// Input and output of the test tools.
type (
	stepsIn struct {
		Steps int `json:"steps" jsonschema:"progress events to report, 1 to 10"`
	}
	holdIn struct{}
	nameIn struct {
		Name string `json:"name" jsonschema:"what to deploy"`
	}
)

// testTools are the tools the Python tests call besides the built-in ones:
// steps reports progress, hold runs until it is cancelled (counting the
// cancellations that reach it), deploy is what the ask rule covers and
// ping what the rate limit covers.
func testTools(cancelled *atomic.Int32) []*tool.Tool {
	steps := tool.Must(tool.New("steps", func(ctx context.Context, in stepsIn) (string, error) {
		n := min(max(in.Steps, 1), 10)
		for i := 1; i <= n; i++ {
			tool.Progress(ctx, fmt.Sprintf("step %d of %d", i, n), float64(100*i/n))
		}
		return fmt.Sprintf("did %d steps", n), nil
	}, tool.WithSummary("Reports progress, then returns.")))
	hold := tool.Must(tool.New("hold", func(ctx context.Context, _ holdIn) (string, error) {
		tool.Progress(ctx, "holding", -1)
		<-ctx.Done()
		cancelled.Add(1)
		return "", ctx.Err()
	}, tool.WithSummary("Runs until cancelled.")))
	deploy := tool.Must(tool.New("deploy", func(_ context.Context, in nameIn) (string, error) {
		return "deployed " + in.Name, nil
	}, tool.WithSummary("Deploys a service (asks for approval).")))
	ping := tool.Must(tool.New("ping", func(context.Context, holdIn) (string, error) {
		return "pong", nil
	}, tool.WithSummary("Answers pong (rate limited).")))
	return append(builtin.Tools(), steps, hold, deploy, ping)
}

// apiKeys writes an API key file for the agent (scopes confirm) and the
// approver (scopes approve) and returns the authenticator and the keys.
func apiKeys(t *testing.T) (identity.Authenticator, string, string) {
	t.Helper()
	agent, approver := randomKey(t), randomKey(t)
	file := fmt.Sprintf("keys:\n  - {sha256: %s, tenant: pytest, agent: py-agent, scopes: [confirm]}\n"+
		"  - {sha256: %s, tenant: pytest, agent: py-approver, scopes: [approve]}\n", sum(agent), sum(approver))
	path := filepath.Join(t.TempDir(), "api-keys.yaml")
	require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
	keys, err := identity.LoadAPIKeys(path)
	require.NoError(t, err)
	return keys, agent, approver
}

func randomKey(t *testing.T) string {
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "tw_" + hex.EncodeToString(b)
}

func sum(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func tokenKeys(t *testing.T) *approvals.Keys {
	t.Helper()
	k := make([]byte, 32)
	_, err := rand.Read(k)
	require.NoError(t, err)
	keys, err := approvals.ParseKeys([]byte("k1:" + base64.StdEncoding.EncodeToString(k) + "\n"))
	require.NoError(t, err)
	return keys
}

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
	var cancelled atomic.Int32
	auth, agent, approver := apiKeys(t)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: testTools(&cancelled), Auth: auth,
		Dispatcher: dispatch.Config{TokenKeys: tokenKeys(t)}})
	s.ApplyPolicy(t, policy)

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
	n, conc := *calls, *concurrency
	require.Positive(t, n)
	require.Positive(t, conc)
	for _, json := range []bool{false, true} {
		// As many idle connections as calls in flight (the default
		// transport keeps 2 a host and would open and close the rest).
		tr := &http.Transport{MaxIdleConnsPerHost: conc}
		defer tr.CloseIdleConnections()
		opts := []client.Option{client.WithAPIKey(key), client.WithHTTPClient(&http.Client{Transport: tr})}
		if json {
			opts = append(opts, client.WithJSON())
		}
		c, err := client.New(url, opts...)
		require.NoError(t, err)
		run := func(calls int) time.Duration {
			var wg sync.WaitGroup
			next := make(chan int)
			start := time.Now()
			for range conc {
				wg.Go(func() {
					for i := range next {
						r, err := c.Call(t.Context(), "echo", map[string]string{"text": "bench " + strconv.Itoa(i)})
						if err == nil {
							err = r.Err()
						}
						if err != nil {
							t.Error(err)
						}
					}
				})
			}
			for i := range calls {
				next <- i
			}
			close(next)
			wg.Wait()
			return time.Since(start)
		}
		run(conc * 4)
		took := run(n)
		t.Logf("FIGURE go-client (json %v): %.0f calls/s, %d calls at concurrency %d in %s", json, float64(n)/took.Seconds(), n, conc, took.Round(time.Millisecond))
	}
}
