package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
)

// statelessRPC posts method with params (and the 2026-07-28 _meta) and
// returns its result, or its error.
func statelessRPC(t *testing.T, url, method string, params map[string]any) (map[string]any, *jsonrpc.Error) {
	t.Helper()
	return statelessRPCAs(t, url, "", method, params, nil)
}

// statelessRPCAs is statelessRPC as the holder of key ("" = no
// Authorization header), with extra keys in _meta (a session, say).
func statelessRPCAs(t *testing.T, url, key, method string, params, extra map[string]any) (map[string]any, *jsonrpc.Error) {
	t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"}}
	for k, v := range extra {
		meta[k] = v
	}
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var header []string
	if key != "" {
		header = []string{"Authorization", "Bearer " + key}
	}
	out := postRPC(t, ctx, url, body, header...)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *jsonrpc.Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal(out, &msg), string(out))
	return msg.Result, msg.Error
}

// The capabilities declared are exactly what is served: without an
// Extra (the production configuration) no prompts are declared, in
// server/discover or initialize, and prompts/list and prompts/get are
// method not found; with an Extra that adds prompts, they are declared
// and listed.
func TestCapabilitiesAreWhatIsServed(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: builtin.Tools()})
	plain := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})

	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, identity.OpenAccess{Identity: identity.Default},
		mcpserver.Config{Version: "test", Extra: conformanceExtra()})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	extra := srv.URL + mcpserver.Path

	t.Run("production: no prompts", func(t *testing.T) {
		res, rpcErr := statelessRPC(t, plain, "server/discover", map[string]any{})
		require.Nil(t, rpcErr)
		caps, _ := res["capabilities"].(map[string]any)
		require.NotNil(t, caps, "%v", res)
		require.NotContains(t, caps, "prompts")
		require.Contains(t, caps, "tools")
		for _, m := range []string{"prompts/list", "prompts/get"} {
			params := map[string]any{}
			if m == "prompts/get" {
				params["name"] = "test_simple_prompt"
			}
			_, rpcErr = statelessRPC(t, plain, m, params)
			require.NotNil(t, rpcErr, m)
			require.EqualValues(t, jsonrpc.CodeMethodNotFound, rpcErr.Code, "%s: %v", m, rpcErr)
		}
		cs := connect(t, plain, "any", "2025-11-25")
		require.Nil(t, cs.InitializeResult().Capabilities.Prompts)
		_, err := cs.ListPrompts(t.Context(), nil)
		require.Error(t, err)
	})

	t.Run("an Extra's prompts: declared and served", func(t *testing.T) {
		res, rpcErr := statelessRPC(t, extra, "server/discover", map[string]any{})
		require.Nil(t, rpcErr)
		caps, _ := res["capabilities"].(map[string]any)
		require.Contains(t, caps, "prompts")
		res, rpcErr = statelessRPC(t, extra, "prompts/list", map[string]any{})
		require.Nil(t, rpcErr)
		require.NotEmpty(t, res["prompts"])
		cs := connect(t, extra, "any", "2025-11-25")
		require.NotNil(t, cs.InitializeResult().Capabilities.Prompts)
		lp, err := cs.ListPrompts(t.Context(), nil)
		require.NoError(t, err)
		require.NotEmpty(t, lp.Prompts)
	})
}
