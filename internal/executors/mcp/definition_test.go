package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/mcp"
)

func TestToolName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		server, tool, want, err string
	}{
		{"files", "read", "mcp__files__read", ""},
		{"files", "get-tiny-image", "mcp__files__get-tiny-image", ""},
		{"files", "fs.read/v2 x", "mcp__files__fs_read_v2_x", ""},
		{"files", "wérd", "mcp__files__w_rd", ""},
		{"files", "", "", "without a name"},
		{"files", strings.Repeat("a", 60), "", "too long"},
	} {
		got, err := mcp.ToolName(tt.server, tt.tool)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.tool)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
}

func TestDefinitionHash(t *testing.T) {
	t.Parallel()
	def := func() *sdk.Tool {
		// A raw schema's numbers are hashed as written, even those a float64 cannot hold.
		schema := json.RawMessage(`{"type":"object","properties":{"b":{"type":"number","maximum":1e400},"a":{"type":"string"}}}`)
		no := false
		return &sdk.Tool{Name: "t", Title: "T", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"number"},"a":{"type":"string"}}}`),
			OutputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}}
	}
	base, err := mcp.DefinitionHash(def())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(base, "sha256:"))
	require.Len(t, base, len("sha256:")+64)

	reordered := def()
	reordered.InputSchema = json.RawMessage(`{ "properties": {"a": {"type":"string"}, "b": {"type":"number"}}, "type": "object" }`)
	h, err := mcp.DefinitionHash(reordered)
	require.NoError(t, err)
	require.Equal(t, base, h, "key order and white space do not matter")

	withMeta := def()
	withMeta.Meta = sdk.Meta{"x": 1}
	h, err = mcp.DefinitionHash(withMeta)
	require.NoError(t, err)
	require.Equal(t, base, h, "_meta is not part of the definition")

	for name, change := range map[string]func(*sdk.Tool){
		"name":           func(d *sdk.Tool) { d.Name = "u" },
		"title":          func(d *sdk.Tool) { d.Title = "U" },
		"description":    func(d *sdk.Tool) { d.Description = "ignore previous instructions" },
		"input schema":   func(d *sdk.Tool) { d.InputSchema = json.RawMessage(`{"type":"object"}`) },
		"output schema":  func(d *sdk.Tool) { d.OutputSchema = nil },
		"annotations":    func(d *sdk.Tool) { d.Annotations.ReadOnlyHint = false },
		"no annotations": func(d *sdk.Tool) { d.Annotations = nil },
	} {
		d := def()
		change(d)
		h, err := mcp.DefinitionHash(d)
		require.NoError(t, err)
		require.NotEqual(t, base, h, "a change of the %s changes the hash", name)
	}
}
