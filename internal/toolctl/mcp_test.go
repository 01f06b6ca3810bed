package toolctl_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// mcp config prints the endpoint of --server with the key as a
// placeholder, or toolctl's own key with --with-key.
func TestMCPConfig(t *testing.T) {
	t.Parallel()
	o := run(t, map[string]string{"TOOLWIRE_API_KEY": "k-123"}, "", "--server", "https://tw.example.com/", "mcp", "config", "-o", "json")
	require.Zero(t, o.code, o.stderr)
	var snippet struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &snippet))
	e := snippet.MCPServers["toolwire"]
	require.Equal(t, "http", e.Type)
	require.Equal(t, "https://tw.example.com/mcp", e.URL)
	require.Equal(t, "Bearer ${TOOLWIRE_API_KEY}", e.Headers["Authorization"], "no key unless asked")

	o = run(t, map[string]string{"TOOLWIRE_API_KEY": "k-123"}, "", "mcp", "config", "--with-key", "--name", "tools")
	require.Zero(t, o.code, o.stderr)
	require.Contains(t, o.stdout, `"tools"`)
	require.Contains(t, o.stdout, "claude mcp add --transport http tools http://127.0.0.1:8080/mcp --header \"Authorization: Bearer k-123\"")

	o = run(t, nil, "", "mcp", "config", "--with-key")
	require.NotZero(t, o.code)
	require.Contains(t, o.stderr, "toolctl has no API key")
}
