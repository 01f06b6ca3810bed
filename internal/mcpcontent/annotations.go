package mcpcontent

import (
	"bytes"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func annotationsFromMCP(a *sdk.Annotations) *toolwirev1.ContentAnnotations {
	if a == nil {
		return nil
	}
	out := &toolwirev1.ContentAnnotations{LastModified: a.LastModified}
	for _, r := range a.Audience {
		out.Audience = append(out.Audience, string(r))
	}
	if a.Priority != 0 {
		out.Priority = proto.Float64(a.Priority)
	}
	return out
}

func annotationsToMCP(a *toolwirev1.ContentAnnotations) *sdk.Annotations {
	if a == nil {
		return nil
	}
	out := &sdk.Annotations{LastModified: a.GetLastModified(), Priority: a.GetPriority()}
	for _, r := range a.GetAudience() {
		out.Audience = append(out.Audience, sdk.Role(r))
	}
	return out
}

// ZeroPriorities sets the priority of the blocks whose annotations say
// `"priority": 0` in raw, the JSON of the CallToolResult content came
// from (block i of content is block i of raw's content). Without raw, or
// when raw does not hold as many blocks, nothing changes.
func ZeroPriorities(content []*toolwirev1.Content, raw json.RawMessage) {
	if len(raw) == 0 || !bytes.Contains(raw, []byte(`"priority"`)) {
		return
	}
	var res struct {
		Content []struct {
			Annotations *struct {
				Priority *float64 `json:"priority"`
			} `json:"annotations"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &res) != nil || len(res.Content) != len(content) {
		return
	}
	for i, b := range res.Content {
		if b.Annotations == nil || b.Annotations.Priority == nil || *b.Annotations.Priority != 0 {
			continue
		}
		if content[i].Annotations == nil {
			content[i].Annotations = &toolwirev1.ContentAnnotations{}
		}
		content[i].Annotations.Priority = proto.Float64(0)
	}
}
