package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
)

// A Mcp-Name header that does not name what the body does (or is
// missing) is answered alike on every method that carries one: HTTP 400
// with -32020, tools/call (the SDK's check) as the tasks methods.
func TestHeaderMismatchIsAnsweredAlike(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: builtin.Tools()})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	const taskID = "01KBB7M9ZJ1QK3Q8N7X2V5R4TZ"
	for _, c := range []struct {
		name, method, header string
		params               map[string]any
	}{
		{"tools/call, another name", "tools/call", "other", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}},
		{"tools/call, no name", "tools/call", "", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}},
		{"tasks/get, another id", "tasks/get", "01KBB7M9ZJ1QK3Q8N7X2V5R4TA", map[string]any{"taskId": taskID}},
		{"tasks/get, no id", "tasks/get", "", map[string]any{"taskId": taskID}},
		{"tasks/cancel, another id", "tasks/cancel", "x", map[string]any{"taskId": taskID}},
		{"tasks/update, another id", "tasks/update", "x", map[string]any{"taskId": taskID, "inputResponses": map[string]any{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.params["_meta"] = meta
			body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": c.method, "params": c.params})
			require.NoError(t, err)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", c.method)
			if c.header != "" {
				req.Header.Set("Mcp-Name", c.header)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(out))
			var msg struct {
				ID    int `json:"id"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out, &msg), string(out))
			require.Equal(t, -32020, msg.Error.Code, string(out))
			require.Equal(t, 7, msg.ID)
		})
	}
}
