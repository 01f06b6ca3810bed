package api_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// scopedKeys authenticates "Bearer <name>" as tenant default with the
// scopes listed under name.
type scopedKeys map[string][]string

func (k scopedKeys) Authenticate(r *http.Request) (identity.Identity, error) {
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	scopes, ok := k[key]
	if !ok {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return identity.Identity{Tenant: "default", Agent: key, Scopes: scopes}, nil
}

func as[T any](key string, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+key)
	return req
}

// Executor configuration (a sandbox tool's argv, an HTTP tool's URL
// template and allowed networks, an MCP tool's server) is shown by
// ListTools and GetTool to installation admins only (the "admin" scope,
// or "*", together with "installation": a tool serves every tenant, so a
// tenant's admin does not see how it runs); every other caller sees the
// tool without it. Before, every caller that could see a tool saw how it
// runs.
func TestExecutorConfigIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true,
		Auth: scopedKeys{"user": {"tools"}, "none": nil, "admin": {"admin"}, "star": {"*"},
			"installadmin": {"admin", "installation"}, "starinstall": {"*", "installation"}, "install": {"installation"}}})
	schema := `{"type":"object","properties":{"q":{"type":"string"}}}`
	specs := []*toolwirev1.ToolSpec{
		{Name: "fetch", Provider: "local", Summary: "s", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, InputSchemaJson: schema,
			Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{Method: "GET", UrlTemplate: "https://internal.example/api?key=abc{&q}",
				AllowNetworks: []string{"10.20.0.0/16"}, Headers: map[string]string{"X-Team": "blue"}}}},
		{Name: "grep", Provider: "local", Summary: "s", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, InputSchemaJson: schema,
			Config: &toolwirev1.ToolSpec_Sandbox{Sandbox: &toolwirev1.SandboxConfig{Argv: []string{"/opt/hidden/grep", "--", "{q}"},
				ReadOnlyPaths: []string{"/srv/data"}}}},
		{Name: "mcp__srv__look", Provider: "srv", Summary: "s", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP, InputSchemaJson: schema,
			Config: &toolwirev1.ToolSpec_Mcp{Mcp: &toolwirev1.McpConfig{Server: "srv", Tool: "look", DefinitionHash: "h1"}}},
	}
	_, err := registry.Publish(t.Context(), s.Env.Bus.Registry, specs)
	require.NoError(t, err)
	for _, sp := range specs {
		s.WaitTool(t, sp.Name)
	}
	secrets := []string{"internal.example", "10.20.0.0/16", "X-Team", "/opt/hidden/grep", "/srv/data", `"h1"`}

	for key, admin := range map[string]bool{"user": false, "none": false, "admin": false, "star": false, "install": false,
		"installadmin": true, "starinstall": true} {
		l, err := s.Client.ListTools(t.Context(), as(key, &toolwirev1.ListToolsRequest{}))
		require.NoError(t, err, key)
		require.Len(t, l.Msg.Tools, 3, key)
		for _, sp := range l.Msg.Tools {
			require.NotEqual(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, sp.Executor, "%s: the executor type stays", key)
			require.Equal(t, schema, sp.InputSchemaJson, key)
			require.Equal(t, admin, sp.GetConfig() != nil, "%s sees the config of %s: %v", key, sp.Name, sp.GetConfig())

			g, err := s.Client.GetTool(t.Context(), as(key, &toolwirev1.GetToolRequest{Name: sp.Name}))
			require.NoError(t, err, key)
			require.Equal(t, admin, g.Msg.Tool.GetConfig() != nil, "%s: GetTool %s", key, sp.Name)
		}
		if admin {
			require.Equal(t, "/opt/hidden/grep", l.Msg.Tools[1].GetSandbox().GetArgv()[0], key)
			continue
		}
		// Nothing of it in any rendering, JSON included.
		for _, f := range []toolwirev1.ToolFormat{toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE, toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI,
			toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC, toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI, toolwirev1.ToolFormat_TOOL_FORMAT_MCP} {
			l, err := s.Client.ListTools(t.Context(), as(key, &toolwirev1.ListToolsRequest{Format: f}))
			require.NoError(t, err)
			text := l.Msg.String()
			for _, secret := range secrets {
				require.NotContains(t, text, secret, "%s, format %s", key, f)
			}
		}
	}
	// The registry itself is unchanged: the worker still gets the config.
	ent, err := s.Registry.Get("grep")
	require.NoError(t, err)
	require.Equal(t, "/opt/hidden/grep", ent.Spec.GetSandbox().GetArgv()[0])
}
