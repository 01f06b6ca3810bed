package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/mcpserver"
)

// endpoint serves the stack's dispatcher as an MCP server with auth.
func endpoint(t *testing.T, d *dispatch.Dispatcher, auth dispatch.Authenticator) string {
	t.Helper()
	mux := http.NewServeMux()
	mcpserver.New(d, auth, mcpserver.Config{Version: "test"}).Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpserver.Path
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func connect(t *testing.T, url, key, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{key, http.DefaultTransport}}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A client of each served revision lists the registry's tools and calls
// one, through the dispatcher and a worker.
func TestListAndCallAtEachRevision(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, dispatch.OpenAccess{Identity: dispatch.DefaultIdentity})
	for _, v := range mcpserver.ProtocolVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, url, "any", v)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			lt, err := cs.ListTools(ctx, nil)
			require.NoError(t, err)
			var names []string
			for _, tl := range lt.Tools {
				names = append(names, tl.Name)
			}
			require.Contains(t, names, "echo")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + v}})
			require.NoError(t, err)
			require.False(t, res.IsError, "%v", res.Content)
			require.Equal(t, "hi "+v, res.Content[0].(*mcp.TextContent).Text)
			b, _ := json.Marshal(res.StructuredContent)
			require.JSONEq(t, `{"text":"hi `+v+`"}`, string(b))
		})
	}
}
