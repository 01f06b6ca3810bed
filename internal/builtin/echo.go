package builtin

import (
	"context"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// EchoInput is the input of echo.
type EchoInput struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

// EchoOutput is the output of echo: its text block is exactly Text.
type EchoOutput struct {
	Text string `json:"text"`
}

// ToolContent implements tool.ContentProvider.
func (o EchoOutput) ToolContent() []*toolwirev1.Content {
	return []*toolwirev1.Content{tool.Text(o.Text)}
}

func newEchoTool() *tool.Tool {
	return tool.Must(tool.New("echo",
		func(_ context.Context, in EchoInput) (EchoOutput, error) {
			return EchoOutput(in), nil
		},
		tool.WithTitle("Echo"),
		tool.WithSummary("Returns the given text unchanged."),
		tool.WithDescription("Returns the given text unchanged, as a text block and as structured output "+
			`{"text": ...}. Useful to check that calls reach a worker and come back.`),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY),
		tool.ReadOnly(), tool.Idempotent(), tool.OpenWorld(false),
	))
}
