package dispatchd_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/testport"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

// alternate sends each request to the next of hosts in turn (a load
// balancer without stickiness), counting what each got.
type alternate struct {
	mu    sync.Mutex
	hosts []string
	next  int
	got   map[string]int
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	host := a.hosts[a.next%len(a.hosts)]
	a.next++
	a.got[host]++
	a.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	return http.DefaultTransport.RoundTrip(r)
}

// The MCP endpoint keeps no state per replica: a client whose requests
// alternate between two dispatcher processes lists and calls tools at
// every protocol revision, each replica answering half of the requests.
func TestMCPAnyReplicaAnswersAnyRequest(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	startWorker(ctx, t, env, workerconfig.Options{Tools: builtin.Tools()})
	a := startDispatcherProc(t, "replica-a", env.URL, testport.Free(t))
	b := startDispatcherProc(t, "replica-b", env.URL, testport.Free(t))
	lb := &alternate{hosts: []string{strings.TrimPrefix(a.url, "http://"), strings.TrimPrefix(b.url, "http://")}, got: map[string]int{}}

	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", HTTPClient: &http.Client{Transport: lb},
			DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		require.NoError(t, err, v)
		require.Eventually(t, func() bool { // the worker's tools reach both registries
			lt, err := cs.ListTools(ctx, nil)
			return err == nil && len(lt.Tools) > 0 && lt.Tools[0].Name != ""
		}, time.Minute, 50*time.Millisecond)
		for range 4 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": v}})
			require.NoError(t, err, v)
			require.False(t, res.IsError, "%v", res.Content)
			require.Equal(t, v, res.Content[0].(*mcp.TextContent).Text)
		}
		require.NoError(t, cs.Close())
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for host, n := range lb.got {
		require.GreaterOrEqual(t, n, 6, "replica %s answered %d requests", host, n)
	}
}
