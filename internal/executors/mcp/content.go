package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// ContentFromMCP maps MCP content blocks one to one onto toolwire content:
// text, image, audio, resource link (with its icons) and embedded resource
// (text or blob), each with its annotations and its `_meta` (as
// Content.meta_json; an embedded resource's own `_meta` as
// EmbeddedResource.meta_json). Image and audio bytes are the decoded
// bytes. An annotation's priority is kept when it is not 0; the SDK's
// type cannot tell a priority of 0 from none, so the executor restores
// those from the result's JSON (zeroPriorities). It returns an error for a kind
// toolwire has no block for (sampling's tool_use and tool_result, which
// are not valid in tool results) rather than dropping or flattening it.
func ContentFromMCP(blocks []sdk.Content) ([]*toolwirev1.Content, error) {
	out := make([]*toolwirev1.Content, 0, len(blocks))
	for i, b := range blocks {
		c, err := contentFromMCP(b)
		if err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func contentFromMCP(b sdk.Content) (*toolwirev1.Content, error) {
	var (
		c    = &toolwirev1.Content{}
		meta sdk.Meta
		ann  *sdk.Annotations
	)
	switch v := b.(type) {
	case *sdk.TextContent:
		c.Kind = &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: v.Text}}
		meta, ann = v.Meta, v.Annotations
	case *sdk.ImageContent:
		c.Kind = &toolwirev1.Content_Image{Image: &toolwirev1.ImageContent{Data: v.Data, MimeType: v.MIMEType}}
		meta, ann = v.Meta, v.Annotations
	case *sdk.AudioContent:
		c.Kind = &toolwirev1.Content_Audio{Audio: &toolwirev1.AudioContent{Data: v.Data, MimeType: v.MIMEType}}
		meta, ann = v.Meta, v.Annotations
	case *sdk.ResourceLink:
		c.Kind = &toolwirev1.Content_ResourceLink{ResourceLink: &toolwirev1.ResourceLink{
			Uri: v.URI, Name: v.Name, Title: v.Title, Description: v.Description, MimeType: v.MIMEType, Size: v.Size,
			Icons: IconsFromMCP(v.Icons),
		}}
		meta, ann = v.Meta, v.Annotations
	case *sdk.EmbeddedResource:
		r := &toolwirev1.EmbeddedResource{}
		if rc := v.Resource; rc != nil {
			r.Uri, r.MimeType = rc.URI, rc.MIMEType
			switch {
			case rc.Blob != nil:
				r.Contents = &toolwirev1.EmbeddedResource_Blob{Blob: rc.Blob}
			default:
				r.Contents = &toolwirev1.EmbeddedResource_Text{Text: rc.Text}
			}
			mj, err := metaJSON(rc.Meta)
			if err != nil {
				return nil, fmt.Errorf("resource _meta: %w", err)
			}
			r.MetaJson = mj
		}
		c.Kind = &toolwirev1.Content_Resource{Resource: r}
		meta, ann = v.Meta, v.Annotations
	case nil:
		return nil, fmt.Errorf("nil content block")
	default:
		return nil, fmt.Errorf("content of type %T has no toolwire block", b)
	}
	mj, err := metaJSON(meta)
	if err != nil {
		return nil, fmt.Errorf("_meta: %w", err)
	}
	c.MetaJson = mj
	c.Annotations = annotationsFromMCP(ann)
	return c, nil
}

// ContentToMCP is the inverse of ContentFromMCP: ContentToMCP(ContentFromMCP(x))
// equals x for every block kind toolwire holds.
func ContentToMCP(blocks []*toolwirev1.Content) ([]sdk.Content, error) {
	out := make([]sdk.Content, 0, len(blocks))
	for i, c := range blocks {
		b, err := contentToMCP(c)
		if err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func contentToMCP(c *toolwirev1.Content) (sdk.Content, error) {
	meta, err := metaFromJSON(c.GetMetaJson())
	if err != nil {
		return nil, fmt.Errorf("meta_json: %w", err)
	}
	ann := annotationsToMCP(c.GetAnnotations())
	switch k := c.GetKind().(type) {
	case *toolwirev1.Content_Text:
		return &sdk.TextContent{Text: k.Text.GetText(), Meta: meta, Annotations: ann}, nil
	case *toolwirev1.Content_Image:
		return &sdk.ImageContent{Data: k.Image.GetData(), MIMEType: k.Image.GetMimeType(), Meta: meta, Annotations: ann}, nil
	case *toolwirev1.Content_Audio:
		return &sdk.AudioContent{Data: k.Audio.GetData(), MIMEType: k.Audio.GetMimeType(), Meta: meta, Annotations: ann}, nil
	case *toolwirev1.Content_ResourceLink:
		l := k.ResourceLink
		return &sdk.ResourceLink{URI: l.GetUri(), Name: l.GetName(), Title: l.GetTitle(), Description: l.GetDescription(),
			MIMEType: l.GetMimeType(), Size: l.Size, Meta: meta, Annotations: ann, Icons: IconsToMCP(l.GetIcons())}, nil
	case *toolwirev1.Content_Resource:
		r := k.Resource
		rmeta, err := metaFromJSON(r.GetMetaJson())
		if err != nil {
			return nil, fmt.Errorf("resource meta_json: %w", err)
		}
		rc := &sdk.ResourceContents{URI: r.GetUri(), MIMEType: r.GetMimeType(), Meta: rmeta}
		switch cc := r.GetContents().(type) {
		case *toolwirev1.EmbeddedResource_Text:
			rc.Text = cc.Text
		case *toolwirev1.EmbeddedResource_Blob:
			rc.Blob = cc.Blob
			if rc.Blob == nil {
				rc.Blob = []byte{}
			}
		}
		return &sdk.EmbeddedResource{Resource: rc, Meta: meta, Annotations: ann}, nil
	}
	return nil, fmt.Errorf("content has no kind")
}

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

// zeroPriorities sets the priority of the blocks whose annotations say
// `"priority": 0` in raw, the JSON of the CallToolResult content came
// from (block i of content is block i of raw's content). Without raw
// nothing changes.
func zeroPriorities(content []*toolwirev1.Content, raw json.RawMessage) {
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

// IconsFromMCP maps MCP icons onto toolwire's, in order.
func IconsFromMCP(icons []sdk.Icon) []*toolwirev1.Icon {
	if len(icons) == 0 {
		return nil
	}
	out := make([]*toolwirev1.Icon, len(icons))
	for i, ic := range icons {
		out[i] = &toolwirev1.Icon{Src: ic.Source, MimeType: ic.MIMEType, Sizes: slices.Clone(ic.Sizes), Theme: string(ic.Theme)}
	}
	return out
}

// IconsToMCP is the inverse of IconsFromMCP.
func IconsToMCP(icons []*toolwirev1.Icon) []sdk.Icon {
	if len(icons) == 0 {
		return nil
	}
	out := make([]sdk.Icon, len(icons))
	for i, ic := range icons {
		out[i] = sdk.Icon{Source: ic.GetSrc(), MIMEType: ic.GetMimeType(), Sizes: slices.Clone(ic.GetSizes()), Theme: sdk.IconTheme(ic.GetTheme())}
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

// metaJSON encodes an MCP `_meta`; empty for none.
func metaJSON(m sdk.Meta) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func metaFromJSON(s string) (sdk.Meta, error) {
	if s == "" {
		return nil, nil
	}
	var m sdk.Meta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Keys of the `_meta` conventions of results (see the package doc).
const (
	// MetaIntents is the result `_meta` key carrying intents:
	// [{"type": "...", "payload": <any JSON>}, ...].
	MetaIntents = "toolwire/intents"
	// MetaError is the `_meta` key of an isError result that types the
	// error: {"type": "RATE_LIMIT", "retryable": true, "sideEffects":
	// "NONE", "retryAfterMs": 2000, "suggestion": "..."}; every field
	// optional.
	MetaError = "toolwire/error"
)

// metaIntent is one element of MetaIntents.
type metaIntent struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// intentsFromMeta decodes MetaIntents into intents with ids i1, i2, ...
func intentsFromMeta(m sdk.Meta) ([]*toolwirev1.Intent, error) {
	raw, ok := m[MetaIntents]
	if !ok || raw == nil {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var list []metaIntent
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("_meta[%q] must be an array of {type, payload}: %w", MetaIntents, err)
	}
	out := make([]*toolwirev1.Intent, 0, len(list))
	for i, in := range list {
		if in.Type == "" {
			return nil, fmt.Errorf("_meta[%q][%d]: empty type", MetaIntents, i)
		}
		var payload string
		if len(in.Payload) > 0 && string(in.Payload) != "null" {
			payload = string(in.Payload)
		}
		out = append(out, &toolwirev1.Intent{Id: fmt.Sprintf("i%d", i+1), Type: in.Type, PayloadJson: payload})
	}
	return out, nil
}

// metaError is the value of MetaError.
type metaError struct {
	Type         string `json:"type"`
	Retryable    *bool  `json:"retryable"`
	SideEffects  string `json:"sideEffects"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Suggestion   string `json:"suggestion"`
}

func (me metaError) retryAfter() time.Duration {
	return time.Duration(me.RetryAfterMs) * time.Millisecond
}
