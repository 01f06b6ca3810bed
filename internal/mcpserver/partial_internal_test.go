package mcpserver

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The notification docs/mcp.md shows under "Partial output" is the one
// the relay sends for that chunk.
func TestDocsShowThePartialNotification(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../docs/mcp.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(docs), "<!-- partial-notification -->\n```json\n")
	require.True(t, ok, "docs/mcp.md marks its example")
	example, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok)

	text := func(s string) *toolwirev1.Content {
		return &toolwirev1.Content{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: s}}}
	}
	ev := &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Attempt: 1, PartialSeq: 3,
		Partial: []*toolwirev1.Content{text("rows 200-299 "), text("done\n")}}
	got, err := json.Marshal(progressParams("p1", 2, ev))
	require.NoError(t, err)
	require.JSONEq(t, example, string(got))
}

// A PROGRESS event without partial output is sent as before: no _meta.
func TestProgressWithoutPartialHasNoMeta(t *testing.T) {
	t.Parallel()
	pct := 40.0
	pp := progressParams("p", 1, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Message: "m", Percent: &pct})
	require.Nil(t, pp.Meta)
	require.Equal(t, "m", pp.Message)
	require.Equal(t, 40.0, pp.Progress)
	require.Equal(t, 100.0, pp.Total)
}
