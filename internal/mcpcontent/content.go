package mcpcontent

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// FromMCP maps MCP content blocks one to one onto toolwire content: text,
// image, audio, resource link (with its icons) and embedded resource
// (text or blob), each with its annotations and its `_meta` (as
// Content.meta_json; an embedded resource's own `_meta` as
// EmbeddedResource.meta_json). Image and audio bytes are the decoded
// bytes. An annotation's priority is kept when it is not 0 (see
// ZeroPriorities). It returns an error naming the block for a kind
// toolwire has no block for (sampling's tool_use and tool_result, which
// are not valid in tool results) rather than dropping or flattening it.
func FromMCP(blocks []sdk.Content) ([]*toolwirev1.Content, error) {
	out := make([]*toolwirev1.Content, 0, len(blocks))
	for i, b := range blocks {
		c, err := fromMCP(b)
		if err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func fromMCP(b sdk.Content) (*toolwirev1.Content, error) {
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
		r, err := resourceFromMCP(v.Resource)
		if err != nil {
			return nil, err
		}
		c.Kind = &toolwirev1.Content_Resource{Resource: r}
		meta, ann = v.Meta, v.Annotations
	case nil:
		return nil, fmt.Errorf("nil content block")
	default:
		return nil, fmt.Errorf("content of type %T has no toolwire block", b)
	}
	mj, err := MetaJSON(meta)
	if err != nil {
		return nil, fmt.Errorf("_meta: %w", err)
	}
	c.MetaJson = mj
	c.Annotations = annotationsFromMCP(ann)
	return c, nil
}

// resourceFromMCP is an embedded resource's contents (none: an empty
// resource).
func resourceFromMCP(rc *sdk.ResourceContents) (*toolwirev1.EmbeddedResource, error) {
	r := &toolwirev1.EmbeddedResource{}
	if rc == nil {
		return r, nil
	}
	r.Uri, r.MimeType = rc.URI, rc.MIMEType
	switch {
	case rc.Blob != nil:
		r.Contents = &toolwirev1.EmbeddedResource_Blob{Blob: rc.Blob}
	default:
		r.Contents = &toolwirev1.EmbeddedResource_Text{Text: rc.Text}
	}
	mj, err := MetaJSON(rc.Meta)
	if err != nil {
		return nil, fmt.Errorf("resource _meta: %w", err)
	}
	r.MetaJson = mj
	return r, nil
}

// ToMCP is the inverse of FromMCP: ToMCP(FromMCP(x)) equals x for every
// block kind toolwire holds. It returns an error naming the block for a
// block with no kind or with `_meta` that is no JSON object.
func ToMCP(blocks []*toolwirev1.Content) ([]sdk.Content, error) {
	out := make([]sdk.Content, 0, len(blocks))
	for i, c := range blocks {
		b, err := toMCP(c)
		if err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func toMCP(c *toolwirev1.Content) (sdk.Content, error) {
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
		rc, err := resourceToMCP(k.Resource)
		if err != nil {
			return nil, err
		}
		return &sdk.EmbeddedResource{Resource: rc, Meta: meta, Annotations: ann}, nil
	}
	return nil, fmt.Errorf("content has no kind")
}

// resourceToMCP is the inverse of resourceFromMCP.
func resourceToMCP(r *toolwirev1.EmbeddedResource) (*sdk.ResourceContents, error) {
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
	return rc, nil
}
