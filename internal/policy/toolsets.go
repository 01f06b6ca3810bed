package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
)

// Tools per model (doc.go, "Toolsets"; docs/toolsets.md). A call and a
// tool list may say which model they are for (the request's model): the
// dispatcher derives the model's family (ModelFamily) and applies the
// family's toolset, which hides tools, substitutes one tool for another
// and offers a simplified schema variant of a tool:
//
//	model_families:               # optional; first entry whose glob matches wins
//	  - {family: gpt, models: ["gpt-*", "o[0-9]*"]}
//	toolsets:
//	  gpt:
//	    hide: [grep_legacy]       # tool name globs this family is not offered
//	    substitute: {edit: apply_patch}   # offered apply_patch, never edit
//	    variants:
//	      apply_patch:
//	        input_schema: {type: object, required: [patch], properties: {patch: {type: string}}}
//
// The model is a claim of the agent service, never an identity: a toolset
// only takes away (a hidden or substituted tool is refused) and narrows
// (a call must satisfy the variant and the tool's own schema); it grants
// nothing, and the rules still decide every call it lets through.

// The bounds of the sections, checked at parse time: every call that
// names a model scans the model_families globs and every tool list
// matches each tool against its toolset's hide globs, so their number is
// capped (docs/toolsets.md, "Bounds").
const (
	// MaxModelFamilies bounds the model_families entries and, apart, the
	// toolsets of a document.
	MaxModelFamilies = 64
	// MaxToolsetEntries bounds the model globs of one model_families
	// entry and the hide globs, substitutes and variants of one toolset.
	MaxToolsetEntries = 256
)

// tooMany reports (once, for field) a list or mapping n with more than
// max entries; the caller then skips it.
func (d decoder) tooMany(n *yaml.Node, field string, max int) bool {
	count := len(n.Content)
	if n.Kind == yaml.MappingNode {
		count /= 2
	}
	if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && count > max {
		d.ps.add(n.Line, field, "has %d entries, more than %d", count, max)
		return true
	}
	return false
}

// MaxModelBytes bounds a model name; ModelNameRE is what one may be.
const MaxModelBytes = 128

// ModelNameRE is what a request's model may be: letters, digits and
// . _ : / @ + -, starting with a letter or digit, at most MaxModelBytes.
var ModelNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// DefaultModelFamily is the family of a model no model_families entry
// matches: the model's name after its last '/' (a provider prefix such
// as "openai/"), its leading run of letters, lowercased. "gpt-5.1" is
// "gpt", "claude-sonnet-4-5" "claude", "openai/gpt-4o" "gpt",
// "gemini-2.5-pro" "gemini"; a model starting with a digit has none ("").
func DefaultModelFamily(model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	end := 0
	for end < len(model) && end < 64 && isASCIILetter(model[end]) {
		end++
	}
	return strings.ToLower(model[:end])
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// ModelFamily returns the family of model: the family of the first
// model_families entry with a glob matching the whole model name, else
// DefaultModelFamily. "" for no model. A nil p uses the default.
func (p *Policy) ModelFamily(model string) string {
	if model == "" {
		return ""
	}
	if p != nil {
		for _, f := range p.families {
			for _, g := range f.models {
				if g.match(model) {
					return f.family
				}
			}
		}
	}
	return DefaultModelFamily(model)
}

// Toolset returns the toolset of a model family, or nil when the policy
// has none for it (every tool offered as registered).
func (p *Policy) Toolset(family string) *Toolset {
	if p == nil || family == "" {
		return nil
	}
	return p.toolsets[family]
}

// Toolsets returns the families that have a toolset, sorted.
func (p *Policy) Toolsets() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.toolsets))
	for f := range p.toolsets {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// Toolset is what one model family is offered. Immutable.
type Toolset struct {
	family   string
	hide     []*glob
	subst    map[string]string // tool → the tool offered instead
	by       map[string]string // the tool offered instead → the tool it replaces
	variants map[string]*Variant
}

// Family is the family the toolset is for.
func (t *Toolset) Family() string { return t.family }

// Offered reports whether the family may see and call tool; when not, why
// says so, naming the toolset (for the caller: the toolset's text is the
// operator's, but what it hides from a caller is that caller's to know).
func (t *Toolset) Offered(tool string) (ok bool, why string) {
	if t == nil {
		return true, ""
	}
	if alt, ok := t.subst[tool]; ok {
		return false, fmt.Sprintf("tool %s is not offered to model family %s: toolset %s offers %s instead", tool, t.family, t.family, alt)
	}
	for _, g := range t.hide {
		if g.match(tool) {
			return false, fmt.Sprintf("tool %s is not offered to model family %s (hidden by toolset %s)", tool, t.family, t.family)
		}
	}
	return true, ""
}

// Variant returns the schema variant the family is offered of tool, or
// nil when it is offered the tool's own schema.
func (t *Toolset) Variant(tool string) *Variant {
	if t == nil {
		return nil
	}
	return t.variants[tool]
}

// Substitute returns the tool the family is offered instead of tool (""
// = none).
func (t *Toolset) Substitute(tool string) string {
	if t == nil {
		return ""
	}
	return t.subst[tool]
}

// Replaces returns the tool the family is offered tool in place of ("" =
// none): the tool that substitute maps to tool.
func (t *Toolset) Replaces(tool string) string {
	if t == nil {
		return ""
	}
	return t.by[tool]
}

// Variant is a simplified schema of a tool offered to one family. A call
// from that family must satisfy it and the tool's own schema: a variant
// that is not a narrowing of the tool's schema offers arguments the tool
// refuses (VALIDATION), never arguments the tool would not accept.
type Variant struct {
	inputJSON string // the document's schema as JSON, keys in file order (as in the canonical form)
	input     *jsonschema.Schema
}

// InputSchemaJSON is the variant's input schema as JSON text: the
// document's schema with its keys in file order, as the canonical form
// renders it (not re-sorted).
func (v *Variant) InputSchemaJSON() string { return v.inputJSON }

// InputSchema is the compiled variant schema (draft 2020-12, no remote
// references), to validate a call's arguments against.
func (v *Variant) InputSchema() *jsonschema.Schema { return v.input }

// View returns spec as the family is offered it: with the variant's input
// schema when the toolset has one for the tool (a copy; spec itself is
// not changed), else spec.
func (t *Toolset) View(spec *toolwirev1.ToolSpec) *toolwirev1.ToolSpec {
	v := t.Variant(spec.GetName())
	if v == nil {
		return spec
	}
	c := cloneSpec(spec)
	c.InputSchemaJson = v.inputJSON
	return c
}

// The decoded sections.
type docFamily struct {
	field  string
	line   int
	family string
	models []docString
}

type docToolset struct {
	field    string
	line     int
	family   string
	hide     []docString
	subst    []docSubst
	variants []docVariant
}

type docSubst struct {
	from, to string
	line     int
}

type docVariant struct {
	tool  string
	line  int
	input []byte // JSON text
}

func (d decoder) modelFamilies(n *yaml.Node) []docFamily {
	if d.tooMany(n, "model_families", MaxModelFamilies) {
		return nil
	}
	var out []docFamily
	d.seq(n, "model_families", func(i int, e *yaml.Node) {
		f := docFamily{field: fmt.Sprintf("model_families[%d]", i), line: e.Line}
		d.mapping(e, f.field, map[string]func(k, v *yaml.Node){
			"family": func(_, v *yaml.Node) { f.family, _ = d.str(v, f.field+".family") },
			"models": func(_, v *yaml.Node) { f.models = d.strings(v, f.field+".models") },
		}, []string{"family", "models"})
		out = append(out, f)
	})
	return out
}

// strings reads a list of strings, each with its line.
func (d decoder) strings(n *yaml.Node, field string) []docString {
	if d.tooMany(n, field, MaxToolsetEntries) {
		return nil
	}
	var out []docString
	d.seq(n, field, func(i int, e *yaml.Node) {
		if s, ok := d.str(e, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, docString{s, e.Line})
		}
	})
	return out
}

func (d decoder) toolsets(n *yaml.Node) []docToolset {
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, "toolsets", "must be a mapping from model families to toolsets, not %s", describe(n))
		return nil
	}
	if d.tooMany(n, "toolsets", MaxModelFamilies) {
		return nil
	}
	var out []docToolset
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := d.str(k, "toolsets")
		if !ok {
			continue
		}
		if seen[name] {
			d.ps.add(k.Line, "toolsets."+name, "is given twice")
			continue
		}
		seen[name] = true
		t := docToolset{field: "toolsets." + name, line: k.Line, family: name}
		if !d.usable(v, t.field) {
			continue
		}
		d.mapping(v, t.field, map[string]func(k, v *yaml.Node){
			"hide":       func(_, v *yaml.Node) { t.hide = d.strings(v, t.field+".hide") },
			"substitute": func(_, v *yaml.Node) { t.subst = d.substitutes(v, t.field+".substitute") },
			"variants":   func(_, v *yaml.Node) { t.variants = d.variants(v, t.field+".variants") },
		}, nil)
		out = append(out, t)
	}
	return out
}

func (d decoder) substitutes(n *yaml.Node, field string) []docSubst {
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, field, "must be a mapping from a tool to the tool offered instead, not %s", describe(n))
		return nil
	}
	if d.tooMany(n, field, MaxToolsetEntries) {
		return nil
	}
	var out []docSubst
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		from, ok1 := d.str(k, field)
		if ok1 && seen[from] {
			d.ps.add(k.Line, field+"."+from, "is given twice")
			continue
		}
		seen[from] = true
		to, ok2 := d.str(v, field+"."+from)
		if ok1 && ok2 {
			out = append(out, docSubst{from: from, to: to, line: k.Line})
		}
	}
	return out
}

func (d decoder) variants(n *yaml.Node, field string) []docVariant {
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, field, "must be a mapping from tools to variants, not %s", describe(n))
		return nil
	}
	if d.tooMany(n, field, MaxToolsetEntries) {
		return nil
	}
	var out []docVariant
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		tool, ok := d.str(k, field)
		if !ok {
			continue
		}
		if seen[tool] {
			d.ps.add(k.Line, field+"."+tool, "is given twice")
			continue
		}
		seen[tool] = true
		dv := docVariant{tool: tool, line: k.Line}
		sub := field + "." + tool
		d.mapping(v, sub, map[string]func(k, v *yaml.Node){
			"input_schema": func(_, v *yaml.Node) {
				if v.Kind != yaml.MappingNode {
					d.ps.add(v.Line, sub+".input_schema", "must be a mapping (a JSON Schema object), not %s", describe(v))
					return
				}
				var b []byte
				if d.json(v, sub+".input_schema", &b) {
					dv.input = b
				}
			},
		}, []string{"input_schema"})
		out = append(out, dv)
	}
	return out
}

// compileModelFamilies checks the family names and model globs.
func compileModelFamilies(dfs []docFamily, ps *problems) []modelFamily {
	var out []modelFamily
	for _, df := range dfs {
		if !hasField(ps, df.field+".family") && !ModeNameRE.MatchString(df.family) {
			ps.add(df.line, df.field+".family", "%q is not a family name (letters, digits and _ -, starting with a letter, at most 64)", df.family)
		}
		f := modelFamily{family: df.family}
		if len(df.models) == 0 && !hasField(ps, df.field+".models") {
			ps.add(df.line, df.field+".models", "must name at least one model glob")
		}
		for i, m := range df.models {
			g, err := compileGlob(m.s)
			if err != nil {
				ps.add(m.line, fmt.Sprintf("%s.models[%d]", df.field, i), "%v", err)
				continue
			}
			f.models = append(f.models, g)
		}
		out = append(out, f)
	}
	return out
}

type modelFamily struct {
	family string
	models []*glob
}

// compileToolsets checks each toolset: a family name, globs that compile,
// a substitution that names two different tools, neither hidden, each
// tool substituted once and never both replaced and offered instead; a
// variant of a tool the family is offered, whose schema compiles.
func compileToolsets(dts []docToolset, ps *problems) map[string]*Toolset {
	out := map[string]*Toolset{}
	for _, dt := range dts {
		if !ModeNameRE.MatchString(dt.family) {
			ps.add(dt.line, dt.field, "%q is not a family name (letters, digits and _ -, starting with a letter, at most 64)", dt.family)
			continue
		}
		t := &Toolset{family: dt.family, subst: map[string]string{}, by: map[string]string{}, variants: map[string]*Variant{}}
		for i, h := range dt.hide {
			g, err := compileGlob(h.s)
			if err != nil {
				ps.add(h.line, fmt.Sprintf("%s.hide[%d]", dt.field, i), "%v", err)
				continue
			}
			t.hide = append(t.hide, g)
		}
		compileSubstitutes(dt, t, ps)
		compileVariants(dt, t, ps)
		out[dt.family] = t
	}
	return out
}

func compileSubstitutes(dt docToolset, t *Toolset, ps *problems) {
	for _, s := range dt.subst {
		field := dt.field + ".substitute." + s.from
		offered, _ := t.Offered(s.to)
		switch {
		case s.from == "" || s.to == "" || s.from == s.to:
			ps.add(s.line, field, "must map a tool to another tool (%q → %q)", s.from, s.to)
		case t.by[s.from] != "" || t.subst[s.to] != "":
			ps.add(s.line, field, "a tool is either substituted or offered instead, not both (%s → %s)", s.from, s.to)
		case t.by[s.to] != "":
			ps.add(s.line, field, "%s is already offered instead of %s", s.to, t.by[s.to])
		case !offered:
			ps.add(s.line, field, "%s is hidden by the toolset: it cannot be offered instead of %s", s.to, s.from)
		default:
			t.subst[s.from], t.by[s.to] = s.to, s.from
		}
	}
}

func compileVariants(dt docToolset, t *Toolset, ps *problems) {
	for _, dv := range dt.variants {
		field := dt.field + ".variants." + dv.tool
		if ok, _ := t.Offered(dv.tool); !ok {
			ps.add(dv.line, field, "%s is not offered to family %s (hidden or substituted): a variant of it is never offered", dv.tool, dt.family)
			continue
		}
		if dv.input == nil {
			continue // reported by the decoder
		}
		sch, err := compileVariantSchema(dv.input)
		if err != nil {
			ps.add(dv.line, field+".input_schema", "%v", err)
			continue
		}
		t.variants[dv.tool] = &Variant{inputJSON: string(dv.input), input: sch}
	}
}

// compileVariantSchema compiles a variant's schema as the registry
// compiles a spec's: draft 2020-12, remote references never loaded.
func compileVariantSchema(text []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noSchemaLoader{})
	const url = "mem:///variant.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return sch, nil
}

type noSchemaLoader struct{}

func (noSchemaLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("remote schema references are not loaded: %s", url)
}

// canonicalModelFamilies and canonicalToolsets render the sections for
// the canonical form (nil when absent).
func canonicalModelFamilies(dfs []docFamily) []map[string]any {
	var out []map[string]any
	for _, f := range dfs {
		models := []string{}
		for _, m := range f.models {
			models = append(models, m.s)
		}
		out = append(out, map[string]any{"family": f.family, "models": models})
	}
	return out
}

// rawJSON is a decoded JSON text as a value of the canonical form.
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// cloneSpec copies a spec (View changes its copy only).
func cloneSpec(s *toolwirev1.ToolSpec) *toolwirev1.ToolSpec { return proto.CloneOf(s) }

func canonicalToolsets(dts []docToolset) map[string]any {
	if len(dts) == 0 {
		return nil
	}
	out := map[string]any{}
	for _, t := range dts {
		c := map[string]any{}
		if len(t.hide) > 0 {
			hide := []string{}
			for _, h := range t.hide {
				hide = append(hide, h.s)
			}
			c["hide"] = hide
		}
		if len(t.subst) > 0 {
			s := map[string]string{}
			for _, x := range t.subst {
				s[x.from] = x.to
			}
			c["substitute"] = s
		}
		if len(t.variants) > 0 {
			v := map[string]any{}
			for _, x := range t.variants {
				v[x.tool] = map[string]any{"input_schema": rawJSON(x.input)}
			}
			c["variants"] = v
		}
		out[t.family] = c
	}
	return out
}
