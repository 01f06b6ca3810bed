package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
)

// askWithMeta asks its caller to confirm and to sample, with ChatGPT keys
// among others in the requests' _meta, a sampling message's and its
// content block's; it waits for release first.
func askWithMeta(release <-chan struct{}) *tool.Tool {
	return tool.Must(tool.New("ask_meta", func(ctx context.Context, _ struct{}) (*tool.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return tool.NeedInput(map[string]tool.InputRequest{
			"ok": {Method: tool.MethodElicit, Params: json.RawMessage(`{"message":"Sure?","requestedSchema":{"type":"object"},` +
				`"_meta":{"openai/widgetState":1,"acme.example/k":2}}`)},
			"draft": {Method: tool.MethodSample, Params: json.RawMessage(`{"maxTokens":5,"messages":[{"role":"user",` +
				`"_meta":{"openai/m":1},"content":{"type":"text","text":"hi","_meta":{"openai/c":1,"acme.example/c":3}}}]}`)},
		}, nil), nil
	}, tool.WithDescription("Asks with _meta"), tool.ReadOnly()))
}

// The input requests of an input-required result are rendered for the
// client like results are: openai/* keys of their params' _meta, a
// sampling message's and its content's reach a ChatGPT client only — on
// tools/call (the fast path and the SDK path, the profile named by
// header) and in tasks/get's input_required.
func TestInputRequestsAreRendered(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	close(release)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), askWithMeta(release))})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	call := func(name string, header ...string) string {
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
			"name": "ask_meta", "arguments": map[string]any{},
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": name, "version": "1"},
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}}}}})
		require.NoError(t, err)
		out := string(postRPC(t, ctx, url, body, header...))
		require.Contains(t, out, "input_required", out)
		return out
	}
	for _, c := range []struct {
		name   string
		header []string
	}{{"claude-ai", nil}, {"some-client", nil}, {"openai-mcp", []string{mcpserver.ProfileHeader, "claude"}}} {
		out := call(c.name, c.header...)
		require.NotContains(t, out, "openai/", "%s %v: %s", c.name, c.header, out)
		require.Contains(t, out, "acme.example/k", out)
		require.Contains(t, out, "acme.example/c", out)
	}
	out := call("openai-mcp")
	for _, k := range []string{"openai/widgetState", "openai/m", "openai/c"} {
		require.Contains(t, out, k)
	}

	t.Run("tasks/get", func(t *testing.T) {
		t.Parallel()
		wait := make(chan struct{})
		s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), askWithMeta(wait)), Auth: agentKeys(t)})
		mux := http.NewServeMux()
		ms, err := mcpserver.New(s.Dispatcher, agentKeys(t), mcpserver.Config{TaskAfter: 100 * time.Millisecond, Tasks: s.Dispatcher.Tasks()})
		require.NoError(t, err)
		ms.Handle(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		a := taskClient{t, srv.URL + mcpserver.Path, "a"}
		created, e := a.rpc("tools/call", map[string]any{"name": "ask_meta", "arguments": map[string]any{}})
		require.Nil(t, e)
		require.Equal(t, "task", created["resultType"])
		close(wait)
		got := a.until(created["taskId"].(string), "input_required")
		b, err := json.Marshal(got["inputRequests"])
		require.NoError(t, err)
		require.NotContains(t, string(b), "openai/", "the default profile: %s", b)
		require.Contains(t, string(b), "acme.example/k")
	})
}
