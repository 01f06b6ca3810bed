package tool

import (
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Result is the output of one successful execution.
type Result struct {
	// Content blocks shown to the model, in order.
	Content []*toolwirev1.Content
	// Structured output as JSON; nil when the tool gives none.
	Structured []byte
	// Intents for the orchestrator, in the order they apply.
	Intents []*toolwirev1.Intent
	// Meta is the tool's own metadata of the result as a JSON object (an
	// MCP tool's result `_meta`), passed on as ToolResponse.meta_json; nil
	// when there is none.
	Meta []byte
	// Input, when set, is the tool's answer that it needs its caller's
	// input first (NeedInput); the Result then has no content, structured
	// output or intents.
	Input *Input
}

// Text returns a text content block.
func Text(s string) *toolwirev1.Content {
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: s}}}
}

// Image returns an image content block.
func Image(data []byte, mimeType string) *toolwirev1.Content {
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Image{Image: &toolwirev1.ImageContent{Data: data, MimeType: mimeType}}}
}

func durationpbNew(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
