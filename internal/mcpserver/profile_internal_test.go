package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/profiles"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A declared client is bounded before it is matched, on both paths: a
// 300 KiB clientInfo name is cut (profiles.ClientName) and gets the
// default profile even though it starts with a shipped pattern, and a
// client declaring more capabilities or extensions than
// profiles.MaxCapabilities is taken to declare none.
func TestDeclaredClientIsBounded(t *testing.T) {
	t.Parallel()
	long := "chatgpt" + strings.Repeat("x", 300<<10)
	caps := map[string]any{}
	for i := range profiles.MaxCapabilities + 1 {
		caps[fmt.Sprintf("cap%d", i)] = map[string]any{}
	}
	meta := map[string]any{metaClientInfo: map[string]any{"name": long}, metaClientCapabilities: caps}
	c := clientOf(meta)
	require.Len(t, c.Name, profiles.MaxClientName+1)
	require.Empty(t, c.Capabilities, "too many capabilities: none considered")
	require.Equal(t, profiles.Plain, profiles.Shipped().Match(c).Name)

	raw := map[string]json.RawMessage{"other": json.RawMessage(`{"x":1}`)}
	for k, v := range meta {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		raw[k] = b
	}
	fc := fastClient(raw)
	require.Len(t, fc.Name, profiles.MaxClientName+1)
	require.Empty(t, fc.Capabilities)

	ext := map[string]any{}
	for i := range profiles.MaxCapabilities + 1 {
		ext[fmt.Sprintf("e%d", i)] = map[string]any{}
	}
	c = clientOf(map[string]any{metaClientInfo: map[string]any{"name": "Claude"},
		metaClientCapabilities: map[string]any{"elicitation": map[string]any{}, "extensions": ext}})
	require.Equal(t, "Claude", c.Name)
	require.Empty(t, c.Capabilities)
	c = clientOf(map[string]any{metaClientCapabilities: map[string]any{"elicitation": map[string]any{},
		"extensions": map[string]any{"io.x/y": map[string]any{}}}})
	require.Equal(t, map[string]bool{"elicitation": true, "extensions/io.x/y": true}, c.Capabilities)
}

// A tool whose _meta is not a JSON object is listed without it (not left
// out), and the numbers of a _meta that is are kept as written.
func TestRenderToolOddMeta(t *testing.T) {
	t.Parallel()
	claude, _ := profiles.Shipped().Named(profiles.Claude)
	spec := &toolwirev1.ToolSpec{MetaJson: `[1,2]`}
	out, dropped, err := renderTool(json.RawMessage(`{"name":"t","_meta":[1,2]}`), spec, claude)
	require.NoError(t, err)
	require.True(t, dropped)
	require.JSONEq(t, `{"name":"t"}`, string(out))

	spec = &toolwirev1.ToolSpec{MetaJson: `{"n":12345678901234567890,"openai/x":1}`}
	out, dropped, err = renderTool(json.RawMessage(`{"name":"t","_meta":{"n":12345678901234567890,"openai/x":1}}`), spec, claude)
	require.NoError(t, err)
	require.False(t, dropped)
	require.Equal(t, `{"_meta":{"n":12345678901234567890},"name":"t"}`, string(out))
}

// The link to a cut result's whole output honours the resource_link text
// fallback; a failed call without content keeps its error's message as
// its first text block when the profile adds the structured content as
// text.
func TestResultLinkAndErrorText(t *testing.T) {
	t.Parallel()
	s := profiles.Shipped()
	cursor, _ := s.Named(profiles.Cursor)
	claude, _ := s.Named(profiles.Claude)
	cut := &toolwirev1.ToolResponse{Ok: true, CallId: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Content: []*toolwirev1.Content{
		{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: "the first part"}}}},
		Meta: &toolwirev1.ResponseMeta{Truncated: true, FullText: &toolwirev1.BlobRef{}}}
	res, err := result(cut, cursor)
	require.NoError(t, err)
	last := res.Content[len(res.Content)-1]
	text, ok := last.(*mcp.TextContent)
	require.True(t, ok, "%#v", last)
	require.Contains(t, text.Text, "<toolwire://calls/01ARZ3NDEKTSV4RRFFQ69G5FAV/output>")
	res, err = result(cut, claude)
	require.NoError(t, err)
	require.IsType(t, &mcp.ResourceLink{}, res.Content[len(res.Content)-1], "claude keeps the link")

	failed := &toolwirev1.ToolResponse{CallId: "01ARZ3NDEKTSV4RRFFQ69G5FAV", StructuredJson: `{"n":1}`,
		Error: &toolwirev1.ToolError{Message: "the oven is cold"}}
	res, err = result(failed, claude)
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Len(t, res.Content, 2)
	require.Equal(t, "the oven is cold", res.Content[0].(*mcp.TextContent).Text)
	require.Equal(t, `{"n":1}`, res.Content[1].(*mcp.TextContent).Text)
}
