package profiles

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Keys of the widget meta a profile generates from a tool's spec.
const (
	// MetaOpenAIOutputTemplate is ChatGPT's key of a tool's widget
	// template (ToolSpec.ui_template).
	MetaOpenAIOutputTemplate = "openai/outputTemplate"
)

// ToolMeta returns a tool's `_meta` as p's clients get it in tools/list: a
// copy of meta with only the keys that pass (Passes), and the widget meta
// generated from spec when p asks for it (Widgets). Nil when nothing is
// left. A nil p passes meta as it is.
func (p *Profile) ToolMeta(meta map[string]any, spec *toolwirev1.ToolSpec) map[string]any {
	if p == nil {
		return meta
	}
	out := p.filter(meta)
	if p.Widgets == WidgetsOpenAI && spec.GetUiTemplate() != "" {
		if out == nil {
			out = map[string]any{}
		}
		// Generated from the spec: a key the tool wrote itself is replaced.
		out[MetaOpenAIOutputTemplate] = spec.GetUiTemplate()
	}
	return out
}

// filter is a copy of meta with the keys that pass; nil when none does.
func (p *Profile) filter(meta map[string]any) map[string]any {
	var out map[string]any
	for k, v := range meta {
		if p.Passes(k) {
			if out == nil {
				out = make(map[string]any, len(meta))
			}
			out[k] = v
		}
	}
	return out
}

// filterJSON is the `_meta` object in s (JSON text) with the keys that
// pass; "" when none does. Text that is not an object is left as it is:
// the faces drop it.
func (p *Profile) filterJSON(s string) string {
	if s == "" {
		return s
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return s
	}
	changed := false
	for k := range m {
		if !p.Passes(k) {
			delete(m, k)
			changed = true
		}
	}
	switch {
	case !changed:
		return s
	case len(m) == 0:
		return ""
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}

// Response returns resp as p's clients get it: a copy whose `_meta` (the
// result's and each content block's) holds only the keys that pass, and
// whose content blocks the client cannot show are replaced by their
// fallbacks (Fallbacks). resp is not changed; a nil p returns it as it
// is.
func (p *Profile) Response(resp *toolwirev1.ToolResponse) *toolwirev1.ToolResponse {
	if p == nil || resp == nil {
		return resp
	}
	out := proto.Clone(resp).(*toolwirev1.ToolResponse)
	out.MetaJson = p.filterJSON(out.GetMetaJson())
	hasText := false
	for i, c := range out.GetContent() {
		c = p.fallback(c)
		c.MetaJson = p.filterJSON(c.GetMetaJson())
		if r := c.GetResource(); r != nil {
			r.MetaJson = p.filterJSON(r.GetMetaJson())
		}
		hasText = hasText || c.GetText() != nil
		out.Content[i] = c
	}
	if p.Fallbacks.Structured == "text" && out.GetStructuredJson() != "" && !hasText {
		out.Content = append(out.Content, text(out.GetStructuredJson()))
	}
	return out
}

// fallback is c, or the text block that replaces it for p's clients.
func (p *Profile) fallback(c *toolwirev1.Content) *toolwirev1.Content {
	var s string
	switch k := c.GetKind().(type) {
	case *toolwirev1.Content_Image:
		if p.Fallbacks.Image != "text" {
			return c
		}
		s = fmt.Sprintf("[image: %s, %d bytes]", k.Image.GetMimeType(), len(k.Image.GetData()))
	case *toolwirev1.Content_Audio:
		if p.Fallbacks.Audio != "text" {
			return c
		}
		s = fmt.Sprintf("[audio: %s, %d bytes]", k.Audio.GetMimeType(), len(k.Audio.GetData()))
	case *toolwirev1.Content_ResourceLink:
		if p.Fallbacks.ResourceLink != "text" {
			return c
		}
		s = linkText(k.ResourceLink)
	case *toolwirev1.Content_Resource:
		if p.Fallbacks.EmbeddedResource != "text" {
			return c
		}
		s = k.Resource.GetText()
		if b := k.Resource.GetBlob(); b != nil {
			s = fmt.Sprintf("[resource %s: %s, %d bytes]", k.Resource.GetUri(), k.Resource.GetMimeType(), len(b))
		}
	default:
		return c
	}
	t := text(s)
	t.Annotations, t.MetaJson = c.GetAnnotations(), c.GetMetaJson()
	return t
}

// linkText is a resource link as text: title (or name), URI, description.
func linkText(l *toolwirev1.ResourceLink) string {
	s := l.GetTitle()
	if s == "" {
		s = l.GetName()
	}
	s += " <" + l.GetUri() + ">"
	if d := l.GetDescription(); d != "" {
		s += ": " + d
	}
	return s
}

func text(s string) *toolwirev1.Content {
	return &toolwirev1.Content{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: s}}}
}
