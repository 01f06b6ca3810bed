package sdkstack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Policy is the installation policy of the stack: the SDK tests'
// scenarios each meet one of its rules, and its toolset (docs/toolsets.md)
// is what a GPT-family model (gpt-5.1) is offered: steps hidden, echo's
// text at most 16 characters.
const Policy = `
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
toolsets:
  gpt:
    hide: [steps]
    variants:
      echo:
        input_schema: {type: object, required: [text], properties: {text: {type: string, maxLength: 16}}, additionalProperties: false}
`

// Stack is a running stack: its API's URL, the agent's key (scope
// confirm), the approver's key (scope approve), the count of
// cancellations that reached the hold tool, and the deploys run.
type Stack struct {
	URL         string
	AgentKey    string
	ApproverKey string
	Cancelled   *atomic.Int32
	Deploys     *Counts
}

// Counts counts runs by name (the deploy tool's, by the name deployed).
type Counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *Counts) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

// Of is how many times name ran.
func (c *Counts) Of(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// Start starts a stack for the test; tenant names the tenant of both
// keys and prefix the agents ("<prefix>-agent", "<prefix>-approver").
func Start(t *testing.T, tenant, prefix string) *Stack {
	t.Helper()
	var cancelled atomic.Int32
	deploys := &Counts{}
	auth, agent, approver := apiKeys(t, tenant, prefix)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: Tools(&cancelled, deploys), Auth: auth,
		Dispatcher: dispatch.Config{TokenKeys: tokenKeys(t)}})
	s.ApplyPolicy(t, Policy)
	return &Stack{URL: s.URL, AgentKey: agent, ApproverKey: approver, Cancelled: &cancelled, Deploys: deploys}
}

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

// Tools are the built-in tools and the test tools: steps reports
// progress, hold runs until it is cancelled (counting the cancellations
// that reach it), deploy is what the ask rule covers (counting its runs
// in deploys) and ping what the rate limit covers.
func Tools(cancelled *atomic.Int32, deploys *Counts) []*tool.Tool {
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
		deploys.add(in.Name)
		return "deployed " + in.Name, nil
	}, tool.WithSummary("Deploys a service (asks for approval).")))
	ping := tool.Must(tool.New("ping", func(context.Context, holdIn) (string, error) {
		return "pong", nil
	}, tool.WithSummary("Answers pong (rate limited).")))
	return append(builtin.Tools(), steps, hold, deploy, ping)
}

// apiKeys writes an API key file for the agent (scopes confirm) and the
// approver (scopes approve) and returns the authenticator and the keys.
func apiKeys(t *testing.T, tenant, prefix string) (identity.Authenticator, string, string) {
	t.Helper()
	agent, approver := randomKey(t), randomKey(t)
	file := fmt.Sprintf("keys:\n  - {sha256: %s, tenant: %s, agent: %s-agent, scopes: [confirm]}\n"+
		"  - {sha256: %s, tenant: %s, agent: %s-approver, scopes: [approve]}\n",
		sum(agent), tenant, prefix, sum(approver), tenant, prefix)
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

// GoBench makes n calls of echo with the Go client (pkg/client, binary
// protobuf and protobuf JSON), conc in flight, on the stack at url, after
// a warm-up of 4*conc calls, and logs the calls/s as a FIGURE line: the
// figure the other SDKs' benches are compared with.
func GoBench(t *testing.T, url, key string, n, conc int) {
	t.Helper()
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
