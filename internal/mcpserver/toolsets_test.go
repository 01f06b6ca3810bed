package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
)

const toolsetsPolicy = `
tenant: {default: allow}
toolsets:
  gpt:
    substitute: {edit: apply_patch}
    variants:
      apply_patch:
        input_schema: {type: object, required: [patch], properties: {patch: {type: string, maxLength: 64}}, additionalProperties: false}
  claude:
    hide: [apply_patch]
`

type mcpEditIn struct {
	Path string `json:"path"`
}

type mcpPatchIn struct {
	Patch string `json:"patch"`
	Strip int    `json:"strip,omitempty"`
}

// MCP tools/list and tools/call answer per model: named by the
// Toolwire-Model header or by io.toolwire/model in the request's _meta
// (both only when they agree); a GPT client is listed apply_patch with
// its variant where a Claude client is listed edit, and its calls are
// held to what it was offered.
func TestToolsetsOverMCP(t *testing.T) {
	t.Parallel()
	edit := tool.Must(tool.New("edit", func(context.Context, mcpEditIn) (string, error) { return "edited", nil }))
	patch := tool.Must(tool.New("apply_patch", func(context.Context, mcpPatchIn) (string, error) { return "patched", nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{edit, patch}})
	s.ApplyPolicy(t, toolsetsPolicy)
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	listed := func(cs *mcp.ClientSession, meta mcp.Meta) map[string]string {
		lt, err := cs.ListTools(ctx, &mcp.ListToolsParams{Meta: meta})
		require.NoError(t, err)
		out := map[string]string{}
		for _, tl := range lt.Tools {
			b, err := json.Marshal(tl.InputSchema)
			require.NoError(t, err)
			out[tl.Name] = string(b)
		}
		return out
	}
	callText := func(cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		require.NoError(t, err)
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		return text, res.IsError
	}

	gpt := connectAs(t, url, "agent", http.Header{mcpserver.ModelHeader: {"gpt-5.1"}})
	l := listed(gpt, nil)
	require.NotContains(t, l, "edit")
	require.Contains(t, l["apply_patch"], `"maxLength":64`)
	text, isErr := callText(gpt, "edit", map[string]any{"path": "a"}, nil)
	require.True(t, isErr)
	require.Contains(t, text, "toolset gpt offers apply_patch instead")
	text, isErr = callText(gpt, "apply_patch", map[string]any{"patch": "x", "strip": 1}, nil)
	require.True(t, isErr, "the variant has no strip")
	require.Contains(t, text, "toolset gpt")
	text, isErr = callText(gpt, "apply_patch", map[string]any{"patch": "x"}, nil)
	require.False(t, isErr, text)

	plain := connectAs(t, url, "agent", nil)
	claude := mcp.Meta{mcpserver.MetaModel: "claude-sonnet-4-5"}
	l = listed(plain, claude)
	require.Contains(t, l, "edit")
	require.NotContains(t, l, "apply_patch")
	text, isErr = callText(plain, "apply_patch", map[string]any{"patch": "x"}, claude)
	require.True(t, isErr)
	require.Contains(t, text, "hidden by toolset claude")
	l = listed(plain, nil)
	require.Contains(t, l, "edit")
	require.NotContains(t, l["apply_patch"], "maxLength", "no model: the registered schema (not the variant cached before)")
	text, isErr = callText(plain, "apply_patch", map[string]any{"patch": "x", "strip": 1}, nil)
	require.False(t, isErr, text)

	_, err := gpt.ListTools(ctx, &mcp.ListToolsParams{Meta: claude})
	require.ErrorContains(t, err, "name different models")
	_, err = plain.ListTools(ctx, &mcp.ListToolsParams{Meta: mcp.Meta{mcpserver.MetaModel: 5}})
	require.ErrorContains(t, err, "must be a string")
}

// A spec's definition that changes only the description (docs/toolsets.md,
// "Definitions in the spec") is what MCP tools/list shows to its family,
// and never what another family is listed from the cached form of the
// same version, nor the other way round.
func TestSpecDefinitionsOverMCP(t *testing.T) {
	t.Parallel()
	edit := tool.Must(tool.New("edit", func(context.Context, mcpEditIn) (string, error) { return "edited", nil },
		tool.WithSummary("Edits a file."),
		tool.WithDefinition(tool.Definition{ModelFamilies: []string{"gemini"}, Description: "Edits one file of the workspace."})))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{edit}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs := connectAs(t, url, "agent", nil)
	described := func(model string) string {
		var meta mcp.Meta
		if model != "" {
			meta = mcp.Meta{mcpserver.MetaModel: model}
		}
		lt, err := cs.ListTools(ctx, &mcp.ListToolsParams{Meta: meta})
		require.NoError(t, err)
		require.Len(t, lt.Tools, 1)
		return lt.Tools[0].Description
	}
	for range 2 { // the second round is served from the cache
		require.Equal(t, "Edits a file.", described(""))
		require.Equal(t, "Edits one file of the workspace.", described("gemini-2.5-pro"))
		require.Equal(t, "Edits a file.", described("gpt-5.1"))
	}
}
