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
// generated from spec when p asks for it (Widgets) and its key passes.
// openai/outputTemplate comes from the spec only: a key of that name the
// tool wrote itself is dropped (registry.Check refuses it too). Values
// are kept as the tool wrote them (raw JSON). Nil when nothing is left. A
// nil p passes meta as it is.
func (p *Profile) ToolMeta(meta map[string]json.RawMessage, spec *toolwirev1.ToolSpec) map[string]json.RawMessage {
	if p == nil {
		return meta
	}
	out := p.filter(meta)
	delete(out, MetaOpenAIOutputTemplate)
	if p.Widgets == WidgetsOpenAI && spec.GetUiTemplate() != "" && p.Passes(MetaOpenAIOutputTemplate) {
		if b, err := json.Marshal(spec.GetUiTemplate()); err == nil {
			if out == nil {
				out = map[string]json.RawMessage{}
			}
			out[MetaOpenAIOutputTemplate] = b
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// filter is a copy of meta with the keys that pass; nil when none does.
func (p *Profile) filter(meta map[string]json.RawMessage) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k, v := range meta {
		if p.Passes(k) {
			if out == nil {
				out = make(map[string]json.RawMessage, len(meta))
			}
			out[k] = v
		}
	}
	return out
}

// filterJSON is the `_meta` object in s (JSON text) with the keys that
// pass; "" when none does, and for text that is not a JSON object (no
// `_meta` at all: nothing unfiltered reaches the client).
func (p *Profile) filterJSON(s string) string {
	if s == "" {
		return s
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return ""
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

// InputParams returns the params (JSON text) of a tool's input request
// (an elicitation, a sampling request, a roots listing) as p's clients
// get it: its `_meta`, and in a sampling request each message's and
// each of its content blocks' `_meta`, hold only the keys that pass
// (a `_meta` that is not an object is dropped). Params that are not a
// JSON object are returned as they are (the dispatcher checked them);
// a nil p returns params as they are.
func (p *Profile) InputParams(params string) string {
	if p == nil || params == "" {
		return params
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &m); err != nil || m == nil {
		return params
	}
	p.filterMetaOf(m)
	if raw, ok := m["messages"]; ok {
		var msgs []map[string]json.RawMessage
		if json.Unmarshal(raw, &msgs) == nil {
			for _, msg := range msgs {
				p.filterMetaOf(msg)
				p.filterContentMeta(msg)
			}
			if b, err := json.Marshal(msgs); err == nil {
				m["messages"] = b
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return string(b)
}

// filterMetaOf filters obj's "_meta" (filterJSON) in place.
func (p *Profile) filterMetaOf(obj map[string]json.RawMessage) {
	raw, ok := obj["_meta"]
	if !ok {
		return
	}
	if f := p.filterJSON(string(raw)); f != "" {
		obj["_meta"] = json.RawMessage(f)
	} else {
		delete(obj, "_meta")
	}
}

// filterContentMeta filters the `_meta` of msg's content: one block or
// a list of them.
func (p *Profile) filterContentMeta(msg map[string]json.RawMessage) {
	raw, ok := msg["content"]
	if !ok {
		return
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(raw, &one) == nil && one != nil {
		p.filterMetaOf(one)
		if b, err := json.Marshal(one); err == nil {
			msg["content"] = b
		}
		return
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		for _, c := range list {
			p.filterMetaOf(c)
		}
		if b, err := json.Marshal(list); err == nil {
			msg["content"] = b
		}
	}
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
		s = LinkText(k.ResourceLink)
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

// LinkText is a resource link as text (the resource_link fallback):
// title (or name), URI, description.
func LinkText(l *toolwirev1.ResourceLink) string {
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
