package mcp_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestSpecs: discovered tools become checked specs of executor type MCP
// with their schemas, annotations and pinned definition; names that do not
// fit toolwire's rule are refused, never guessed.
func TestSpecs(t *testing.T) {
	t.Parallel()
	srv := newFixtureServer(fixtureOptions{running: tempDir(t)})
	noop := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("ok"), nil }
	obj := map[string]any{"type": "object"}
	srv.AddTool(&sdk.Tool{Name: "fs.read", InputSchema: obj}, noop)
	srv.AddTool(&sdk.Tool{Name: "a.b", InputSchema: obj}, noop)
	srv.AddTool(&sdk.Tool{Name: "a_b", InputSchema: obj}, noop)
	srv.AddTool(&sdk.Tool{Name: strings.Repeat("long", 16), InputSchema: obj}, noop)
	logs := &syncBuffer{}
	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "fx", HTTP: &mcp.HTTPConfig{URL: httpServer(t, srv)}, Required: true}),
		mcp.Options{Logger: bufferLogger(logs)})

	specs := e.Specs()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		require.NoError(t, registry.Check(s))
		require.Equal(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP, s.Executor)
		require.Equal(t, "fx", s.Provider)
		require.Equal(t, "fx", s.GetMcp().GetServer())
		require.True(t, strings.HasPrefix(s.GetMcp().GetDefinitionHash(), "sha256:"))
		require.False(t, s.Disabled)
	}
	require.True(t, slices.IsSorted(names), "sorted by name")
	require.Contains(t, names, "mcp__fx__fs_read", "sanitized")
	require.NotContains(t, names, "mcp__fx__a_b", "colliding names are refused")
	require.Contains(t, logs.String(), "their names collide once sanitized")
	require.Contains(t, logs.String(), "too long")

	byTool := specsByTool(e)
	img := byTool["image"]
	require.Equal(t, "An image", img.Title, "the annotations' title when the tool has none")
	require.True(t, img.GetAnnotations().GetReadOnly())
	require.Nil(t, img.GetAnnotations().Destructive, "unset hints stay unset")
	st := byTool["structured"]
	require.Contains(t, st.InputSchemaJson, `"text"`)
	require.Contains(t, st.OutputSchemaJson, `"text"`)
	require.Equal(t, "Echoes text as structured output.", st.Description)
	require.Equal(t, "structured", st.GetMcp().GetTool())

	specs[0].Name = "changed"
	require.NotEqual(t, "changed", e.Specs()[0].Name, "Specs returns copies")
}
