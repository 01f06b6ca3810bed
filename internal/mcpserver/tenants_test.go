package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Over MCP another tenant's call output answers exactly as an id nobody
// minted does: resource not found (issue 28, finding 5: it answered "has
// not finished").
func TestAnotherTenantsOutputIsNotFound(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: builtin.Tools(), Auth: twoTenantKeys(t)})
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, twoTenantKeys(t), mcpserver.Config{Tasks: s.Dispatcher.Tasks()})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r, err := s.Dispatcher.Call(t.Context(), identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}},
		&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok)

	read := func(key, id string) string {
		uri := "toolwire://calls/" + id + "/output"
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": map[string]any{"uri": uri,
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
		require.NoError(t, err)
		out := postRPC(t, t.Context(), srv.URL+mcpserver.Path, body, "Authorization", "Bearer "+key, "Mcp-Name", uri)
		var msg struct {
			Result map[string]any `json:"result"`
			Error  *struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(out, &msg), string(out))
		if msg.Error != nil {
			return fmt.Sprint(msg.Error.Code, " ", strings.ReplaceAll(msg.Error.Message, id, "ID"))
		}
		return fmt.Sprint("ok ", msg.Result["contents"] != nil)
	}
	madeUp := read("b", ulid.Make().String())
	require.Contains(t, strings.ToLower(madeUp), "not found", madeUp)
	require.NotContains(t, madeUp, "has not finished")
	require.NotContains(t, madeUp, "ok")
	require.Equal(t, madeUp, read("b", r.CallId), "another tenant's call")
	require.Equal(t, "ok true", read("a", r.CallId), "the owner reads it")
}
