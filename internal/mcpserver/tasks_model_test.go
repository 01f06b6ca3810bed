package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A task's later rounds are calls for the model and the session its
// first call was made for: a tool that asks for input inside a task is
// continued under the same toolset and session, whatever model the
// tasks/update's client names (docs/mcp.md, "Tasks").
func TestTaskRoundsKeepTheModel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	asks := tool.Must(tool.New("ask_family", func(ctx context.Context, _ struct{}) (*tool.Result, error) {
		if a := tool.InputFrom(ctx); a != nil && a.PreviousCallID != "" {
			info, _ := tool.CallInfoFrom(ctx)
			c := info.Caller
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text(c.GetModel() + "|" + c.GetModelFamily() + "|" + c.GetSession())}}, nil
		}
		select { // a task before it asks
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return tool.NeedInput(map[string]tool.InputRequest{"ok": tool.Elicit("Go on?", map[string]any{"type": "object"})}, nil), nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{asks}, Auth: twoTenantKeys(t)})
	// Another family is not offered the tool: a later round under the
	// model a tasks/update names would be refused.
	s.ApplyPolicy(t, "tenant: {default: allow}\ntoolsets:\n  claude: {hide: [ask_family]}\n")
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, twoTenantKeys(t), mcpserver.Config{TaskAfter: 100 * time.Millisecond, Tasks: s.Dispatcher.Tasks()})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + mcpserver.Path

	rpc := func(model, method string, params map[string]any) map[string]any {
		t.Helper()
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
				"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
		if method == "tools/call" {
			meta[mcpserver.MetaSession] = "s-model"
		}
		params["_meta"] = meta
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out := postRPC(t, ctx, url, body, "Authorization", "Bearer a", mcpserver.ModelHeader, model)
		var msg struct {
			Result map[string]any  `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal(out, &msg), string(out))
		require.Nil(t, msg.Error, string(out))
		return msg.Result
	}
	until := func(id, want string) map[string]any {
		var last map[string]any
		require.Eventually(t, func() bool {
			last = rpc("claude-sonnet-4-5", "tasks/get", map[string]any{"taskId": id})
			return last["status"] == want
		}, 30*time.Second, 50*time.Millisecond, "task %s never %s", id, want)
		return last
	}

	created := rpc("gpt-5.1", "tools/call", map[string]any{"name": "ask_family", "arguments": map[string]any{}})
	require.Equal(t, "task", created["resultType"], created)
	id := created["taskId"].(string)
	close(release)
	require.Contains(t, until(id, "input_required")["inputRequests"], "1.ok")
	// Answered by a client that names another model: the round that
	// continues the task is the first call's model's.
	rpc("claude-sonnet-4-5", "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"1.ok": map[string]any{"action": "accept", "content": map[string]any{}}}})
	done := until(id, "completed")
	text := done["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	require.Equal(t, "gpt-5.1|gpt|s-model", text)
}
