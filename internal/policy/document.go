package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwire/toolwire/internal/jsonvalue"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.yaml.in/yaml/v3"
)

// MaxDocumentBytes bounds a policy document; a larger one is refused
// before it is parsed.
const MaxDocumentBytes = 1 << 20

// The decoded document, before compilation. Every part keeps its line so
// compile errors can name it.
type document struct {
	tenant docLayer
	agents []docAgent // file order; names unique
	modes  []docAgent // file order; names unique (name: the mode)
	tests  []docTest
	limits []docLimit // limits.go
	loop   *docLoop   // loopguard.go; nil = the defaults
	hooks  []docHook  // hooks.go

	budgets []docLatencyBudget // latencybudgets.go

	sessions *docSessions // sessions.go; nil = no section

	families []docFamily  // toolsets.go; file order
	toolsets []docToolset // toolsets.go; file order
}

type docAgent struct {
	name  string
	line  int
	layer docLayer
}

type docLayer struct {
	field   string // "tenant" or "agents.<name>"
	line    int
	def     Effect // 0: no default
	defLine int
	rules   []docRule
	// sessions is the layer's sessions: section (sessions.go), not the
	// document's (document.sessions).
	sessions layerSessions
}

type docRule struct {
	field     string // "tenant.rules[0]"
	line      int
	id        string
	effect    Effect
	tools     []docString
	args      []docArg
	when      string
	whenLine  int
	whenStyle yaml.Style
	reason    string
}

type docString struct {
	s    string
	line int
}

type docArg struct {
	field   string
	pattern any // string (glob), bool, nil, int64 or float64
	line    int
}

type docTest struct {
	field            string // "tests[0]"
	line             int
	name             string
	tool             string
	args             []byte // JSON text; nil = {}
	argsLine         int
	caller           *toolwirev1.Caller
	expect           Effect
	requiresApproval *bool
	annotations      *toolwirev1.ToolAnnotations
}

// decodeDocument parses the YAML text of a policy document strictly:
// unknown fields, duplicate keys, wrong types, aliases, tags other than
// YAML 1.2's core ones and more than one document are problems. YAML 1.2
// scalars: only true/false are booleans (yes, no, on, off are strings).
func decodeDocument(data []byte) (*document, problems) {
	var ps problems
	if len(data) > MaxDocumentBytes {
		ps.add(0, "", "the document is %d bytes, over the limit of %d", len(data), MaxDocumentBytes)
		return nil, ps
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			ps.add(0, "", "the document is empty")
		} else {
			ps.addYAML(err)
		}
		return nil, ps
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			ps.addYAML(err)
			return nil, ps
		}
		ps.add(line, "", "a policy file holds one YAML document (found a second after ---)")
		return nil, ps
	}
	d := decoder{ps: &ps}
	doc := &document{tenant: docLayer{field: "tenant"}}
	if len(root.Content) == 0 {
		ps.add(0, "", "the document is empty")
		return nil, ps
	}
	top := root.Content[0]
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		ps.add(top.Line, "", "the document is empty")
		return nil, ps
	}
	d.mapping(top, "", map[string]func(k, v *yaml.Node){
		"tenant":     func(_, v *yaml.Node) { d.layer(v, &doc.tenant) },
		"agents":     func(_, v *yaml.Node) { doc.agents = d.layers(v, "agents", "agent") },
		"modes":      func(_, v *yaml.Node) { doc.modes = d.layers(v, "modes", "mode") },
		"tests":      func(_, v *yaml.Node) { doc.tests = d.tests(v) },
		"limits":     func(_, v *yaml.Node) { doc.limits = d.limits(v) },
		"loop_guard": func(_, v *yaml.Node) { doc.loop = d.loopGuard(v) },
		"hooks":      func(_, v *yaml.Node) { doc.hooks = d.hooks(v) },

		"latency_budgets": func(_, v *yaml.Node) { doc.budgets = d.latencyBudgets(v) }, // latencybudgets.go
		"sessions":        func(_, v *yaml.Node) { doc.sessions = d.sessions(v) },      // sessions.go
		"model_families":  func(_, v *yaml.Node) { doc.families = d.modelFamilies(v) }, // toolsets.go
		"toolsets":        func(_, v *yaml.Node) { doc.toolsets = d.toolsets(v) },      // toolsets.go
	}, nil)
	return doc, ps
}

// yamlLiteral is the style of a literal block scalar (|).
const yamlLiteral = yaml.LiteralStyle

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// addYAML adds a YAML syntax error, with its line when it names one.
func (ps *problems) addYAML(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		ps.add(line, "", "YAML: %s", m[2])
		return
	}
	ps.add(0, "", "YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// decoder walks the YAML node tree and records problems as it goes.
type decoder struct{ ps *problems }

// usable reports whether n can be read, recording why not: aliases are
// not supported (they make a small file expand into a large one).
func (d decoder) usable(n *yaml.Node, field string) bool {
	if n.Kind == yaml.AliasNode {
		d.ps.add(n.Line, field, "YAML aliases (*%s) are not supported", n.Value)
		return false
	}
	return true
}

// mapping reads a mapping: every key must have a handler (else "unknown
// field") and appear once; every name in required must appear.
func (d decoder) mapping(n *yaml.Node, field string, handlers map[string]func(k, v *yaml.Node), required []string) {
	if !d.usable(n, field) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, field, "must be a mapping, not %s", describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			d.ps.add(k.Line, field, "keys must be strings, not %s", describe(k))
			continue
		}
		sub := join(field, k.Value)
		if seen[k.Value] {
			d.ps.add(k.Line, sub, "is given twice")
			continue
		}
		seen[k.Value] = true
		h, ok := handlers[k.Value]
		if !ok {
			d.ps.add(k.Line, sub, "unknown field (%s)", knownFields(handlers))
			continue
		}
		if d.usable(v, sub) {
			h(k, v)
		}
	}
	for _, r := range required {
		if !seen[r] {
			d.ps.add(n.Line, join(field, r), "is required")
		}
	}
}

func knownFields(handlers map[string]func(k, v *yaml.Node)) string {
	names := make([]string, 0, len(handlers))
	for name := range handlers {
		names = append(names, name)
	}
	slices.Sort(names)
	return "known: " + strings.Join(names, ", ")
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a " + n.ShortTag() + " value"
	}
	return "nothing"
}

// str reads a string scalar.
func (d decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.ps.add(n.Line, field, "must be a string, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// boolean reads a true/false scalar.
func (d decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.ps.add(n.Line, field, "must be true or false, not %s", describe(n))
		return false, false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", true
}

func (d decoder) effect(n *yaml.Node, field string) Effect {
	s, ok := d.str(n, field)
	if !ok {
		return 0
	}
	e, ok := ParseEffect(s)
	if !ok {
		d.ps.add(n.Line, field, "must be allow, ask or deny, not %q", s)
	}
	return e
}

// seq calls each for every element of a list.
func (d decoder) seq(n *yaml.Node, field string, each func(i int, e *yaml.Node)) {
	if n.Kind != yaml.SequenceNode {
		d.ps.add(n.Line, field, "must be a list, not %s", describe(n))
		return
	}
	for i, e := range n.Content {
		sub := fmt.Sprintf("%s[%d]", field, i)
		if d.usable(e, sub) {
			each(i, e)
		}
	}
}

func (d decoder) layer(n *yaml.Node, l *docLayer) {
	l.line = n.Line
	d.mapping(n, l.field, map[string]func(k, v *yaml.Node){
		"default": func(_, v *yaml.Node) {
			l.def, l.defLine = d.effect(v, l.field+".default"), v.Line
		},
		"rules": func(_, v *yaml.Node) {
			d.seq(v, l.field+".rules", func(i int, e *yaml.Node) {
				l.rules = append(l.rules, d.rule(e, fmt.Sprintf("%s.rules[%d]", l.field, i)))
			})
		},
		"sessions": func(_, v *yaml.Node) { l.sessions = d.layerSessions(v, l.field+".sessions") }, // sessions.go
	}, nil)
}

// layers decodes the named layers of section ("agents" or "modes"), each
// named by a what ("agent" or "mode").
func (d decoder) layers(n *yaml.Node, section, what string) []docAgent {
	var out []docAgent
	if !d.usable(n, section) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, section, "must be a mapping from %s names to layers, not %s", what, describe(n))
		return nil
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := d.str(k, section)
		if !ok {
			continue
		}
		field := section + "." + name
		switch {
		case name == "":
			d.ps.add(k.Line, section, "an %s name must not be empty", what)
			continue
		case what == "mode" && !ModeNameRE.MatchString(name):
			d.ps.add(k.Line, field, "%q is not a mode name (letters, digits and _ -, starting with a letter, at most 64)", name)
			continue
		case seen[name]:
			d.ps.add(k.Line, field, "is given twice")
			continue
		}
		seen[name] = true
		a := docAgent{name: name, line: k.Line, layer: docLayer{field: field}}
		if d.usable(v, field) {
			d.layer(v, &a.layer)
		}
		out = append(out, a)
	}
	return out
}

func (d decoder) rule(n *yaml.Node, field string) docRule {
	r := docRule{field: field, line: n.Line}
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"id":     func(_, v *yaml.Node) { r.id, _ = d.str(v, field+".id") },
		"effect": func(_, v *yaml.Node) { r.effect = d.effect(v, field+".effect") },
		"tools": func(_, v *yaml.Node) {
			d.seq(v, field+".tools", func(i int, e *yaml.Node) {
				if s, ok := d.str(e, fmt.Sprintf("%s.tools[%d]", field, i)); ok {
					r.tools = append(r.tools, docString{s, e.Line})
				}
			})
		},
		"args": func(_, v *yaml.Node) { r.args = d.argPatterns(v, field+".args") },
		"when": func(_, v *yaml.Node) {
			r.when, _ = d.str(v, field+".when")
			r.whenLine, r.whenStyle = v.Line, v.Style
		},
		"reason": func(_, v *yaml.Node) { r.reason, _ = d.str(v, field+".reason") },
	}, []string{"id", "effect", "tools"})
	return r
}

// argPatterns reads `args`: field path → glob string, or an exact
// boolean, number or null.
func (d decoder) argPatterns(n *yaml.Node, field string) []docArg {
	if n.Kind != yaml.MappingNode {
		d.ps.add(n.Line, field, "must be a mapping from field paths to patterns, not %s", describe(n))
		return nil
	}
	var out []docArg
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := d.str(k, field)
		if !ok {
			continue
		}
		sub := field + "." + name
		if seen[name] {
			d.ps.add(k.Line, sub, "is given twice")
			continue
		}
		seen[name] = true
		if !d.usable(v, sub) {
			continue
		}
		if v.Kind != yaml.ScalarNode {
			d.ps.add(v.Line, sub, "a pattern is a string (glob), a number, true, false or null, not %s", describe(v))
			continue
		}
		var pat any
		switch v.ShortTag() {
		case "!!str":
			pat = v.Value
		case "!!bool":
			pat, _ = d.boolean(v, sub)
		case "!!null":
			pat = nil
		case "!!int", "!!float":
			num, err := yamlNumber(v)
			if err != nil {
				d.ps.add(v.Line, sub, "%v", err)
				continue
			}
			pat, _ = jsonvalue.NativeNumber(num)
		default:
			d.ps.add(v.Line, sub, "a pattern is a string (glob), a number, true, false or null, not %s", describe(v))
			continue
		}
		out = append(out, docArg{field: name, pattern: pat, line: v.Line})
	}
	return out
}

func (d decoder) tests(n *yaml.Node) []docTest {
	var out []docTest
	d.seq(n, "tests", func(i int, e *yaml.Node) {
		field := fmt.Sprintf("tests[%d]", i)
		t := docTest{field: field, line: e.Line}
		d.mapping(e, field, map[string]func(k, v *yaml.Node){
			"name": func(_, v *yaml.Node) { t.name, _ = d.str(v, field+".name") },
			"tool": func(_, v *yaml.Node) { t.tool, _ = d.str(v, field+".tool") },
			"args": func(_, v *yaml.Node) {
				t.argsLine = v.Line
				if v.Kind != yaml.MappingNode {
					d.ps.add(v.Line, field+".args", "must be a mapping, not %s", describe(v))
					return
				}
				var b []byte
				if d.json(v, field+".args", &b) {
					t.args = b
				}
			},
			"caller": func(_, v *yaml.Node) { t.caller = d.caller(v, field+".caller") },
			"expect": func(_, v *yaml.Node) { t.expect = d.effect(v, field+".expect") },
			"requires_approval": func(_, v *yaml.Node) {
				b, ok := d.boolean(v, field+".requires_approval")
				t.requiresApproval = ptrIf(b, ok)
			},
			"annotations": func(_, v *yaml.Node) { t.annotations = d.annotations(v, field+".annotations") },
		}, []string{"tool", "expect"})
		out = append(out, t)
	})
	return out
}

func ptrIf(b, ok bool) *bool {
	if !ok {
		return nil
	}
	return &b
}

func (d decoder) caller(n *yaml.Node, field string) *toolwirev1.Caller {
	c := &toolwirev1.Caller{}
	s := func(dst *string, name string) func(_, v *yaml.Node) {
		return func(_, v *yaml.Node) { *dst, _ = d.str(v, field+"."+name) }
	}
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"tenant":  s(&c.Tenant, "tenant"),
		"agent":   s(&c.Agent, "agent"),
		"session": s(&c.Session, "session"),
		"user":    s(&c.User, "user"),
		"run":     s(&c.Run, "run"),
		"turn":    s(&c.Turn, "turn"),
		"mode":    s(&c.Mode, "mode"),
		// The model the test's call is made for (toolsets.go); its
		// family, when not given, is the document's ModelFamily of it.
		"model":        s(&c.Model, "model"),
		"model_family": s(&c.ModelFamily, "model_family"),
		// The delegation chain a test's call carries (caller.parent,
		// caller.parent_call_id, caller.root_call_id, caller.depth).
		"parent":         s(&c.ParentTool, "parent"),
		"parent_call_id": s(&c.ParentCallId, "parent_call_id"),
		"root_call_id":   s(&c.RootCallId, "root_call_id"),
		"depth": func(_, v *yaml.Node) {
			n, err := strconv.ParseInt(v.Value, 10, 32)
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || err != nil || n < 0 {
				d.ps.add(v.Line, field+".depth", "must be a whole number of 0 or more, not %s", describe(v))
				return
			}
			c.Depth = int32(n)
		},
		"scopes": func(_, v *yaml.Node) {
			d.seq(v, field+".scopes", func(i int, e *yaml.Node) {
				if sc, ok := d.str(e, fmt.Sprintf("%s.scopes[%d]", field, i)); ok {
					c.Scopes = append(c.Scopes, sc)
				}
			})
		},
	}, nil)
	return c
}

func (d decoder) annotations(n *yaml.Node, field string) *toolwirev1.ToolAnnotations {
	a := &toolwirev1.ToolAnnotations{}
	b := func(dst **bool, name string) func(_, v *yaml.Node) {
		return func(_, v *yaml.Node) {
			if x, ok := d.boolean(v, field+"."+name); ok {
				*dst = &x
			}
		}
	}
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"read_only":   b(&a.ReadOnly, "read_only"),
		"destructive": b(&a.Destructive, "destructive"),
		"idempotent":  b(&a.Idempotent, "idempotent"),
		"open_world":  b(&a.OpenWorld, "open_world"),
	}, nil)
	return a
}

// json appends the JSON text of a YAML value (mappings with string keys,
// lists, strings, numbers, booleans, null) to out; false on a problem.
func (d decoder) json(n *yaml.Node, field string, out *[]byte) bool {
	if !d.usable(n, field) {
		return false
	}
	switch n.Kind {
	case yaml.MappingNode:
		*out = append(*out, '{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key, ok := d.str(k, field)
			if !ok {
				return false
			}
			if seen[key] {
				d.ps.add(k.Line, field+"."+key, "is given twice")
				return false
			}
			seen[key] = true
			if i > 0 {
				*out = append(*out, ',')
			}
			*out = jsonvalue.AppendCanonicalString(*out, key)
			*out = append(*out, ':')
			if !d.json(v, field+"."+key, out) {
				return false
			}
		}
		*out = append(*out, '}')
	case yaml.SequenceNode:
		*out = append(*out, '[')
		for i, e := range n.Content {
			if i > 0 {
				*out = append(*out, ',')
			}
			if !d.json(e, fmt.Sprintf("%s[%d]", field, i), out) {
				return false
			}
		}
		*out = append(*out, ']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp":
			*out = jsonvalue.AppendCanonicalString(*out, n.Value)
		case "!!bool":
			b, _ := d.boolean(n, field)
			*out = strconv.AppendBool(*out, b)
		case "!!null":
			*out = append(*out, "null"...)
		case "!!int", "!!float":
			num, err := yamlNumber(n)
			if err != nil {
				d.ps.add(n.Line, field, "%v", err)
				return false
			}
			*out = append(*out, num...)
		default:
			d.ps.add(n.Line, field, "%s is not a JSON value", describe(n))
			return false
		}
	default:
		d.ps.add(n.Line, field, "%s is not a JSON value", describe(n))
		return false
	}
	return true
}

// yamlNumber returns the canonical JSON number of a YAML int or float
// scalar (0x1F, 0o17, 1_000, .5 and +1 included); .inf and .nan are not
// numbers JSON can hold.
func yamlNumber(n *yaml.Node) (string, error) {
	text := strings.ReplaceAll(n.Value, "_", "")
	if n.ShortTag() == "!!int" {
		// 0x, 0o and 0b prefixes; a plain leading 0 stays decimal (YAML 1.2).
		base, digits := 10, strings.TrimLeft(text, "+-")
		if len(digits) > 1 && digits[0] == '0' && strings.ContainsRune("xXoObB", rune(digits[1])) {
			base = 0
		}
		if i, err := strconv.ParseInt(text, base, 64); err == nil {
			return strconv.FormatInt(i, 10), nil
		}
		if u, err := strconv.ParseUint(strings.TrimPrefix(text, "+"), base, 64); err == nil {
			return strconv.FormatUint(u, 10), nil
		}
	}
	// A decimal the JSON grammar accepts once a leading + is dropped and a
	// bare leading or trailing point is given its zero.
	t := strings.TrimPrefix(text, "+")
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	if strings.HasPrefix(t, ".") {
		t = "0" + t
	}
	t = strings.Replace(t, ".e", ".0e", 1)
	t = strings.Replace(t, ".E", ".0E", 1)
	if strings.HasSuffix(t, ".") {
		t += "0"
	}
	if neg {
		t = "-" + t
	}
	out, err := jsonvalue.CanonicalNumber(t)
	switch {
	case errors.Is(err, jsonvalue.ErrNumberRange):
		return "", fmt.Errorf("%q is not a number JSON can hold: %w", n.Value, jsonvalue.ErrNumberRange)
	case err != nil:
		return "", fmt.Errorf("%q is not a number JSON can hold", n.Value)
	}
	return out, nil
}
