package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Keyword marks a property of a tool's input schema as secret:
// {"type": "string", "x-toolwire-secret": true}.
const Keyword = tool.SecretKeyword

// Redacted replaces secret values.
const Redacted = "[REDACTED]"

// redactedWhole stands for arguments that cannot be shown safely.
var redactedWhole = json.RawMessage(`"` + Redacted + `"`)

// Plan is the secret structure of one input schema: which properties, items
// and additional properties hold secrets. A nil *Plan (a schema that marks
// nothing) redacts nothing; its methods are safe to call.
type Plan struct {
	root *node
	// complete says root reaches every mark of the schema. An incomplete
	// plan fails closed: every argument value counts as secret.
	complete bool
}

// node is the secret structure of a schema: secret here, or the nodes of
// properties and items.
type node struct {
	secret bool
	props  map[string]*node
	items  *node
	// additional applies to properties not named (additionalProperties).
	additional *node
}

// count is the number of marks n reaches.
func (n *node) count() int {
	if n == nil {
		return 0
	}
	if n.secret {
		return 1
	}
	c := n.items.count() + n.additional.count()
	for _, sp := range n.props {
		c += sp.count()
	}
	return c
}

func (n *node) empty() bool {
	return n == nil || (!n.secret && len(n.props) == 0 && n.items == nil && n.additional == nil)
}

// maxSchemaDepth bounds how deep marks are followed.
const maxSchemaDepth = 32

func compileNode(schema any, depth int) *node {
	m, ok := schema.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return nil
	}
	n := &node{}
	if s, _ := m[Keyword].(bool); s {
		n.secret = true
		return n
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			if sp := compileNode(sub, depth+1); !sp.empty() {
				if n.props == nil {
					n.props = map[string]*node{}
				}
				n.props[name] = sp
			}
		}
	}
	if sp := compileNode(m["items"], depth+1); !sp.empty() {
		n.items = sp
	}
	if sp := compileNode(m["additionalProperties"], depth+1); !sp.empty() {
		n.additional = sp
	}
	if n.empty() {
		return nil
	}
	return n
}

// countMarks counts the schema objects anywhere in v marked secret
// (Keyword: true), not those inside one already marked (its whole value is
// redacted). A mark that compileNode does not reach makes the two counts
// differ: the plan is then incomplete. The keyword set to false, or
// mentioned in a description, is no mark.
func countMarks(v any) int {
	switch x := v.(type) {
	case map[string]any:
		if s, _ := x[Keyword].(bool); s {
			return 1
		}
		n := 0
		for _, e := range x {
			n += countMarks(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += countMarks(e)
		}
		return n
	}
	return 0
}

// plans caches compiled plans by schema text (only of schemas that carry
// the keyword); it is emptied when it passes maxPlans.
var (
	plans     sync.Map // string -> *Plan
	planCount atomic.Int64
)

const maxPlans = 1024

// Compile returns the plan of an input schema (JSON text). A schema whose
// text does not carry Keyword gives nil at the cost of one substring
// search: no parse, no lock, no allocation. Others are compiled once per
// schema text and cached. A schema that is not JSON, or marks a property
// where properties, items and additionalProperties do not reach ($ref,
// allOf, patternProperties, ...), gives an incomplete plan that fails
// closed.
func Compile(schemaJSON string) *Plan {
	if !strings.Contains(schemaJSON, Keyword) {
		return nil
	}
	if p, ok := plans.Load(schemaJSON); ok {
		return p.(*Plan)
	}
	var schema any
	err := json.Unmarshal([]byte(schemaJSON), &schema)
	root := compileNode(schema, 0)
	p := &Plan{root: root, complete: err == nil && root.count() == countMarks(schema)}
	if planCount.Add(1) > maxPlans {
		plans.Clear()
		planCount.Store(1)
	}
	plans.Store(schemaJSON, p)
	return p
}

// ForSpec returns the plan of spec's input schema (nil when it marks
// nothing secret, or spec is nil).
func ForSpec(spec *toolwirev1.ToolSpec) *Plan {
	return Compile(spec.GetInputSchemaJson())
}

// Arguments returns args with the values the plan marks secret replaced by
// Redacted, for showing arguments as structure (audit records, dead
// letters). Other values keep their exact text (big integers included).
// Arguments that cannot be shown safely are replaced whole: those of an
// incomplete plan, and arguments that are not JSON when the plan marks
// anything. With a nil plan, JSON arguments are returned as they are and
// others as a JSON string.
func (p *Plan) Arguments(args []byte) json.RawMessage {
	if p == nil {
		if json.Valid(args) {
			return args
		}
		b, _ := json.Marshal(string(args))
		return b
	}
	if !p.complete {
		return redactedWhole
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // big integers stay exact
	if err := dec.Decode(&v); err != nil {
		return redactedWhole
	}
	b, _ := json.Marshal(apply(p.root, v))
	return b
}

func apply(n *node, v any) any {
	if n == nil {
		return v
	}
	if n.secret {
		return Redacted
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if sp, ok := n.props[k]; ok {
				x[k] = apply(sp, e)
			} else if n.additional != nil {
				x[k] = apply(n.additional, e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = apply(n.items, e)
		}
	}
	return v
}

// Secrets returns the secret values of one call's arguments, to redact
// from the text of everything the call produces. It returns nil (nothing
// to redact) for a nil plan and for arguments that hold no secret value.
// An incomplete plan fails closed: every string and number of the
// arguments counts as secret; so do arguments that are not JSON, whole.
func (p *Plan) Secrets(args []byte) *Secrets {
	if p == nil {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return newSecrets([]string{string(args)})
	}
	var vals []string
	if p.complete {
		collect(p.root, v, &vals)
	} else {
		leaves(v, &vals)
	}
	return newSecrets(vals)
}

// AllOf returns every string and number of args (or args whole when it is
// not JSON) as secret values: for arguments whose schema is unknown.
func AllOf(args []byte) *Secrets {
	return (&Plan{}).Secrets(args)
}

// collect appends the values under the secret nodes of n.
func collect(n *node, v any, out *[]string) {
	if n == nil {
		return
	}
	if n.secret {
		leaves(v, out)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if sp, ok := n.props[k]; ok {
				collect(sp, e, out)
			} else if n.additional != nil {
				collect(n.additional, e, out)
			}
		}
	case []any:
		for _, e := range x {
			collect(n.items, e, out)
		}
	}
}

// leaves appends the strings and numbers in v. Booleans and null carry
// no secret worth hiding (and "true" would be redacted everywhere).
func leaves(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case json.Number:
		*out = append(*out, x.String())
	case map[string]any:
		for _, e := range x {
			leaves(e, out)
		}
	case []any:
		for _, e := range x {
			leaves(e, out)
		}
	}
}
