package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/pkg/tool"
)

// SecretKeyword marks a property of a tool's input schema as secret:
// {"type": "string", "x-toolwire-secret": true}. Its value is replaced by
// Redacted in every audit output (records, exports, replay diffs).
const SecretKeyword = tool.SecretKeyword

// Redacted replaces secret values.
const Redacted = "[REDACTED]"

// redactedWhole stands for arguments that cannot be shown safely.
var redactedWhole = json.RawMessage(`"` + Redacted + `"`)

// redactor redacts arguments by the schema of a spec version; compiled
// plans are cached per schema text.
type redactor struct {
	mu    sync.Mutex
	plans map[string]*plan
}

// plan is the secret structure of a schema: secret here, or the plans of
// properties and items.
type plan struct {
	secret bool
	props  map[string]*plan
	items  *plan
	// additional applies to properties not named (additionalProperties).
	additional *plan
}

// count is the number of secret values p redacts.
func (p *plan) count() int {
	if p == nil {
		return 0
	}
	if p.secret {
		return 1
	}
	n := p.items.count() + p.additional.count()
	for _, sp := range p.props {
		n += sp.count()
	}
	return n
}

func (p *plan) empty() bool {
	return p == nil || (!p.secret && len(p.props) == 0 && p.items == nil && p.additional == nil)
}

func compilePlan(schema any, depth int) *plan {
	m, ok := schema.(map[string]any)
	if !ok || depth > 32 {
		return nil
	}
	p := &plan{}
	if s, _ := m[SecretKeyword].(bool); s {
		p.secret = true
		return p
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			if sp := compilePlan(sub, depth+1); !sp.empty() {
				if p.props == nil {
					p.props = map[string]*plan{}
				}
				p.props[name] = sp
			}
		}
	}
	if sp := compilePlan(m["items"], depth+1); !sp.empty() {
		p.items = sp
	}
	if sp := compilePlan(m["additionalProperties"], depth+1); !sp.empty() {
		p.additional = sp
	}
	if p.empty() {
		return nil
	}
	return p
}

func (r *redactor) plan(schemaJSON string) *plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.plans[schemaJSON]; ok {
		return p
	}
	var schema any
	_ = json.Unmarshal([]byte(schemaJSON), &schema)
	p := compilePlan(schema, 0)
	if r.plans == nil {
		r.plans = map[string]*plan{}
	}
	r.plans[schemaJSON] = p
	return p
}

// redact returns args with the values the schema marks secret replaced.
// Arguments that are not JSON are replaced whole when the schema has any
// secret (nothing can be shown safely).
func (r *redactor) redact(schemaJSON string, args []byte) json.RawMessage {
	p := r.plan(schemaJSON)
	if strings.Contains(schemaJSON, SecretKeyword) && p.count() < strings.Count(schemaJSON, SecretKeyword) {
		// A secret marked where the plan does not reach ($ref, allOf,
		// patternProperties, ...): nothing can be shown safely.
		return redactedWhole
	}
	if p == nil {
		if json.Valid(args) {
			return args
		}
		b, _ := json.Marshal(string(args))
		return b
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // big integers stay exact
	if err := dec.Decode(&v); err != nil {
		b, _ := json.Marshal(Redacted)
		return b
	}
	b, _ := json.Marshal(apply(p, v))
	return b
}

func apply(p *plan, v any) any {
	if p == nil {
		return v
	}
	if p.secret {
		return Redacted
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if sp, ok := p.props[k]; ok {
				x[k] = apply(sp, e)
			} else if p.additional != nil {
				x[k] = apply(p.additional, e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = apply(p.items, e)
		}
	}
	return v
}
