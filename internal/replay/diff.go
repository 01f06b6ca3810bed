package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Change is one difference between an original response and its replay.
type Change struct {
	// Field is a path into the response: "ok", "error.type",
	// "content[0]", "structured.items[2].name", "intents[1].payload", ...
	Field    string          `json:"field"`
	Original json.RawMessage `json:"original"`
	Replay   json.RawMessage `json:"replay"`
}

// Diff compares what a caller sees of two responses: success, error type
// and message, content blocks, structured output (JSON, by value) and
// intents (type and payload, by value). Meta (worker, timings) is not
// compared.
func Diff(orig, rep *toolwirev1.ToolResponse) []Change {
	var out []Change
	add := func(field string, a, b any) {
		out = append(out, Change{Field: field, Original: js(a), Replay: js(b)})
	}
	if orig.GetOk() != rep.GetOk() {
		add("ok", orig.GetOk(), rep.GetOk())
	}
	oe, re := orig.GetError(), rep.GetError()
	if oe.GetType() != re.GetType() {
		add("error.type", typeName(oe), typeName(re))
	}
	if oe.GetMessage() != re.GetMessage() {
		add("error.message", oe.GetMessage(), re.GetMessage())
	}
	oc, rc := orig.GetContent(), rep.GetContent()
	for i := range max(len(oc), len(rc)) {
		var a, b *toolwirev1.Content
		if i < len(oc) {
			a = oc[i]
		}
		if i < len(rc) {
			b = rc[i]
		}
		if !proto.Equal(a, b) {
			out = append(out, Change{Field: fmt.Sprintf("content[%d]", i), Original: pj(a), Replay: pj(b)})
		}
	}
	out = append(out, jsonDiff("structured", raw(orig.GetStructuredJson()), raw(rep.GetStructuredJson()))...)
	oi, ri := orig.GetIntents(), rep.GetIntents()
	for i := range max(len(oi), len(ri)) {
		var a, b *toolwirev1.Intent
		if i < len(oi) {
			a = oi[i]
		}
		if i < len(ri) {
			b = ri[i]
		}
		f := fmt.Sprintf("intents[%d]", i)
		switch {
		case a == nil || b == nil:
			out = append(out, Change{Field: f, Original: pj(a), Replay: pj(b)})
		case a.GetType() != b.GetType():
			add(f+".type", a.GetType(), b.GetType())
		default:
			out = append(out, jsonDiff(f+".payload", raw(a.GetPayloadJson()), raw(b.GetPayloadJson()))...)
		}
	}
	return out
}

func typeName(e *toolwirev1.ToolError) string {
	if e == nil {
		return ""
	}
	return e.GetType().String()
}

// jsonDiff compares two JSON documents by value, descending into objects
// and arrays to name the paths that differ.
func jsonDiff(path string, a, b json.RawMessage) []Change {
	if bytes.Equal(a, b) {
		return nil
	}
	var x, y any
	ex, ey := decode(a, &x), decode(b, &y)
	if ex != nil || ey != nil {
		return []Change{{Field: path, Original: jsOrNull(a), Replay: jsOrNull(b)}}
	}
	return valueDiff(path, x, y)
}

func valueDiff(path string, x, y any) []Change {
	switch xv := x.(type) {
	case map[string]any:
		if yv, ok := y.(map[string]any); ok {
			var out []Change
			keys := slices.Sorted(maps.Keys(xv))
			for k := range yv {
				if _, ok := xv[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range slices.Compact(keys) {
				a, ina := xv[k]
				b, inb := yv[k]
				switch {
				case !ina || !inb:
					out = append(out, Change{Field: path + "." + k, Original: jsAbsent(a, ina), Replay: jsAbsent(b, inb)})
				default:
					out = append(out, valueDiff(path+"."+k, a, b)...)
				}
			}
			return out
		}
	case []any:
		if yv, ok := y.([]any); ok && len(xv) == len(yv) {
			var out []Change
			for i := range xv {
				out = append(out, valueDiff(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i])...)
			}
			return out
		}
	}
	if bytes.Equal(js(x), js(y)) {
		return nil
	}
	return []Change{{Field: path, Original: js(x), Replay: js(y)}}
}

func decode(b json.RawMessage, v *any) error {
	if len(b) == 0 {
		*v = nil
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func js(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

func jsOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return js(string(b))
	}
	return b
}

func jsAbsent(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	return js(v)
}

func pj(m proto.Message) json.RawMessage {
	if m == nil || !m.ProtoReflect().IsValid() {
		return json.RawMessage(`null`)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}
