package mcpserver

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/mcpcontent"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MetaPartial, in the _meta of a notifications/progress, is a chunk of
// the call's partial output (tool.Partial): an object with "seq" (the
// chunk's number in its attempt, from 1), "attempt" and "content" (the
// chunk's content blocks, as in a tool result). The notification's
// message is the text of the chunk's text blocks.
const MetaPartial = "io.toolwire/partial"

// PartialMeta is the value of MetaPartial.
type PartialMeta struct {
	Seq     uint32        `json:"seq"`
	Attempt int32         `json:"attempt"`
	Content []mcp.Content `json:"content"`
}

// progressParams is the progress notification of a PROGRESS event ev for
// token, after one with progress prev (0 before the first): progress only
// increases, as MCP requires, so it is max(prev+1, the percentage) when
// the tool gave one (of a total of 100 while it is at most 100), else
// prev+1 — a count. A chunk of partial output goes in its _meta
// (MetaPartial), its text as the message.
func progressParams(token any, prev float64, ev *toolwirev1.CallEvent) *mcp.ProgressNotificationParams {
	pp := &mcp.ProgressNotificationParams{ProgressToken: token, Message: ev.Message, Progress: prev + 1}
	if ev.Percent != nil {
		pp.Progress = max(prev+1, *ev.Percent)
		if pp.Progress <= 100 {
			pp.Total = 100
		}
	}
	if len(ev.Partial) == 0 {
		return pp
	}
	content, err := mcpcontent.ToMCP(ev.Partial)
	if err != nil {
		// A block MCP has no form for: the text still goes as the message.
		content = nil
	}
	pp.Meta = mcp.Meta{MetaPartial: PartialMeta{Seq: ev.PartialSeq, Attempt: ev.Attempt, Content: content}}
	if pp.Message == "" {
		pp.Message = partialText(ev.Partial)
	}
	return pp
}

// partialText is the text of the text blocks of a chunk, joined as they
// come (a chunk of streamed text carries its own spaces and newlines).
func partialText(blocks []*toolwirev1.Content) string {
	var b strings.Builder
	for _, c := range blocks {
		if t, ok := c.GetKind().(*toolwirev1.Content_Text); ok {
			b.WriteString(t.Text.GetText())
		}
	}
	return b.String()
}
