package policy

import (
	"bytes"

	"github.com/toolwire/toolwire/internal/jsonvalue"
	"github.com/toolwire/toolwire/pkg/tool"
)

// SignificantKeyword marks a top-level property of a tool's input schema
// for the loop guard (tool.SignificantKeyword, whose doc says what it
// means).
const SignificantKeyword = tool.SignificantKeyword

// LoopFields is what of a tool's arguments the loop guard compares, from
// its input schema (doc.go, "Loop guard"). Its canonical form of a call's
// arguments is the canonical JSON (Canonicalize) of the top-level
// members that are left after leaving out:
//
//   - a member the schema does not require whose value is null, or the
//     canonical equal of the property's "default": it changes nothing;
//   - a member whose property is marked x-toolwire-significant: false and
//     not required;
//   - when any property is marked x-toolwire-significant: true, every
//     member neither required nor marked true.
//
// Nested values are compared whole. A nil *LoopFields (no schema) compares
// every member.
type LoopFields struct {
	required map[string]bool
	noise    map[string]bool   // marked false, not required
	only     map[string]bool   // marked true or required, when any is marked true
	defaults map[string][]byte // canonical text of the declared defaults
}

// CompileLoopFields reads a tool's input schema (JSON) for the loop
// guard; nil when it does not parse (then every member is compared).
func CompileLoopFields(inputSchema []byte) *LoopFields {
	doc, err := jsonvalue.Parse(inputSchema)
	if err != nil {
		return nil
	}
	root, _ := doc.Object()
	props, _ := root["properties"].(map[string]any)
	f := &LoopFields{required: map[string]bool{}, noise: map[string]bool{}, defaults: map[string][]byte{}}
	reqs, _ := root["required"].([]any)
	for _, r := range reqs {
		if s, ok := r.(string); ok {
			f.required[s] = true
		}
	}
	for name, p := range props {
		pm, _ := p.(map[string]any)
		if def, ok := pm["default"]; ok {
			f.defaults[name] = jsonvalue.AppendCanonical(nil, def)
		}
		switch pm[SignificantKeyword] {
		case true:
			if f.only == nil {
				f.only = map[string]bool{}
			}
			f.only[name] = true
		case false:
			f.noise[name] = true
		}
	}
	if f.only != nil {
		for r := range f.required {
			f.only[r] = true
		}
	}
	return f
}

// Fingerprint is the loop guard's fingerprint of a call of tool with
// args: the hex SHA-256 of the tool and the canonical form above.
func (f *LoopFields) Fingerprint(tool string, args *Args) string {
	return fingerprint(tool, f.Canonical(args))
}

// Canonical is the canonical form of args the loop guard compares.
func (f *LoopFields) Canonical(args *Args) []byte {
	obj, _ := args.Doc().Object()
	keep := make(map[string]any, len(obj))
	dropped := false
	for k, v := range obj {
		if f.leavesOut(k, v) {
			dropped = true
			continue
		}
		keep[k] = v
	}
	if !dropped {
		return args.Canonical()
	}
	return jsonvalue.AppendCanonical(nil, keep)
}

func (f *LoopFields) leavesOut(name string, v any) bool {
	if f == nil {
		return false
	}
	if f.required[name] {
		return false
	}
	if v == nil || f.noise[name] || (f.only != nil && !f.only[name]) {
		return true
	}
	def, ok := f.defaults[name]
	return ok && bytes.Equal(jsonvalue.AppendCanonical(nil, v), def)
}
