package mcpcontent

import (
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MetaPartial, in the _meta of a notifications/progress, is a chunk of a
// call's partial output: an object with "seq" (the chunk's number in its
// attempt, from 1), "attempt" and "content" (the chunk's content blocks,
// as in a tool result). The MCP face writes it (internal/mcpserver); the
// MCP executor reads it from upstream servers (PartialFromMeta).
const MetaPartial = "io.toolwire/partial"

// maxPartialMeta bounds the JSON of a MetaPartial read from an upstream
// server before it is decoded: a chunk toolwire would send is at most
// 64 KiB of blocks (tool.MaxPartialChunkBytes), and its text is in the
// JSON once more as the notification's message at most; base64 makes
// binary blocks a third larger.
const maxPartialMeta = 256 << 10

// PartialFromMeta returns the content blocks of the MetaPartial in meta;
// nil, nil when meta has none. It returns an error for a value that is
// not such an object, is over maxPartialMeta, or holds a block toolwire
// has no kind for.
func PartialFromMeta(meta sdk.Meta) ([]*toolwirev1.Content, error) {
	v, ok := meta[MetaPartial]
	if !ok {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MetaPartial, err)
	}
	if len(raw) > maxPartialMeta {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", MetaPartial, len(raw), maxPartialMeta)
	}
	// A tool result's decoding is the SDK's one decoder of content blocks.
	var res sdk.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", MetaPartial, err)
	}
	if len(res.Content) == 0 {
		return nil, errors.New(MetaPartial + ": no content blocks")
	}
	blocks, err := FromMCP(res.Content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MetaPartial, err)
	}
	return blocks, nil
}
