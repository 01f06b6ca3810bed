package policy

import (
	"fmt"
	"strings"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.yaml.in/yaml/v3"
)

// Latency budgets of a document (doc.go, "Latency budgets"): soft bounds
// on how long a call should take, from its admission to its stored
// result. A call over its budget still runs and answers; the dispatcher
// that admitted it records the overrun (a WARN log, a metric, the
// response's meta and an event on the call's timeline).
//
//	latency_budgets:
//	  - id: voice-retrieval   # optional; names the entry in meta and logs
//	    tools: ["search_*"]   # default: every tool
//	    category: retrieval   # retrieval | action | utility; default: any
//	    mode: voice           # a session mode; default: any (see below)
//	    soft: 800ms           # required: from 1ms to 1h
//
// An entry applies to a call when every selector it gives matches: one of
// its tools (globs), the tool's category, and the call's session mode. A
// mode is matched only against a mode the call is known to be in (the
// dispatcher passes the mode of the call's session, caller.mode): an
// entry that names a mode never applies to a call without one. Of the entries that apply and the tool spec's own
// budget (timeouts.latency_budget), the tightest holds: a budget is
// never loosened by another. Like loop_guard, the section is the
// document's own, beside its layers.

// Bounds of the latency budgets.
const (
	// MaxLatencyBudgets bounds the entries of a document.
	MaxLatencyBudgets = 64
	// maxLatencyBudget bounds a budget; minLatencyBudget is the least.
	maxLatencyBudget = time.Hour
	minLatencyBudget = time.Millisecond
)

// Where a budget came from (LatencyBudget.Source).
const (
	BudgetFromSpec   = "spec"
	BudgetFromPolicy = "policy"
)

type docLatencyBudget struct {
	field    string // "latency_budgets[0]"
	line     int
	id       string
	tools    []docString
	toolsSet bool // tools was given (empty is a problem)
	category string
	mode     string
	soft     time.Duration
}

// LatencyBudget is the soft budget a call is held to.
type LatencyBudget struct {
	Soft time.Duration
	// Source is BudgetFromSpec or BudgetFromPolicy.
	Source string
	// Entry names the policy's entry: its id, or latency_budgets[i].
	Entry string
	// Mode is the mode the entry names ("" for any).
	Mode string
	// PolicyVersion is the version of the document that holds the entry.
	PolicyVersion string
}

// latencyBudget is one compiled entry.
type latencyBudget struct {
	name     string
	tools    []*glob // nil: every tool
	category toolwirev1.ToolCategory
	mode     string
	soft     time.Duration
}

// applies reports whether the entry covers a call of spec in mode ("":
// none known).
func (b *latencyBudget) applies(spec *toolwirev1.ToolSpec, mode string) bool {
	if b.category != toolwirev1.ToolCategory_TOOL_CATEGORY_UNSPECIFIED && spec.GetCategory() != b.category {
		return false
	}
	if b.mode != "" && b.mode != mode {
		return false
	}
	if b.tools == nil {
		return true
	}
	for _, g := range b.tools {
		if g.match(spec.GetName()) {
			return true
		}
	}
	return false
}

// LatencyBudgetFor returns the soft latency budget a call of spec is held
// to in session mode mode ("" when the call's mode is not known: entries
// that name a mode do not apply): the tightest of the spec's
// timeouts.latency_budget and the entries of p that apply. ok is false
// when there is none. A nil p (no policy) gives the spec's.
func (p *Policy) LatencyBudgetFor(spec *toolwirev1.ToolSpec, mode string) (b LatencyBudget, ok bool) {
	if d := spec.GetTimeouts().GetLatencyBudget().AsDuration(); d > 0 {
		b, ok = LatencyBudget{Soft: d, Source: BudgetFromSpec}, true
	}
	if p == nil {
		return b, ok
	}
	for _, e := range p.budgets {
		if e.applies(spec, mode) && (!ok || e.soft < b.Soft) {
			b, ok = LatencyBudget{Soft: e.soft, Source: BudgetFromPolicy, Entry: e.name, Mode: e.mode, PolicyVersion: p.version}, true
		}
	}
	return b, ok
}

func (d decoder) latencyBudgets(n *yaml.Node) []docLatencyBudget {
	var out []docLatencyBudget
	d.seq(n, "latency_budgets", func(i int, e *yaml.Node) {
		if i == MaxLatencyBudgets {
			d.ps.add(e.Line, "latency_budgets", "at most %d entries", MaxLatencyBudgets)
		}
		if i >= MaxLatencyBudgets {
			return
		}
		out = append(out, d.latencyBudget(e, fmt.Sprintf("latency_budgets[%d]", i)))
	})
	return out
}

func (d decoder) latencyBudget(n *yaml.Node, field string) docLatencyBudget {
	b := docLatencyBudget{field: field, line: n.Line}
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"id": func(_, v *yaml.Node) { b.id, _ = d.str(v, field+".id") },
		"tools": func(_, v *yaml.Node) {
			b.toolsSet = true
			d.seq(v, field+".tools", func(i int, e *yaml.Node) {
				if s, ok := d.str(e, fmt.Sprintf("%s.tools[%d]", field, i)); ok {
					b.tools = append(b.tools, docString{s, e.Line})
				}
			})
		},
		"category": func(_, v *yaml.Node) {
			if s, ok := d.str(v, field+".category"); ok {
				if categoryOf(s) == toolwirev1.ToolCategory_TOOL_CATEGORY_UNSPECIFIED {
					d.ps.add(v.Line, field+".category", "must be retrieval, action or utility, not %q", s)
				}
				b.category = s
			}
		},
		"mode": func(_, v *yaml.Node) {
			if s, ok := d.str(v, field+".mode"); ok {
				if s == "" {
					d.ps.add(v.Line, field+".mode", "must not be empty (leave it out for any mode)")
				}
				b.mode = s
			}
		},
		"soft": func(_, v *yaml.Node) { b.soft = d.budget(v, field+".soft") },
	}, []string{"soft"})
	return b
}

// budget reads a duration from minLatencyBudget to maxLatencyBudget.
func (d decoder) budget(n *yaml.Node, field string) time.Duration {
	s, ok := d.str(n, field)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < minLatencyBudget || v > maxLatencyBudget {
		d.ps.add(n.Line, field, "must be a duration from %s to %s (e.g. 800ms, 2s), not %q", minLatencyBudget, maxLatencyBudget, s)
		return 0
	}
	return v
}

// categoryOf is the category named by a word of the document
// (UNSPECIFIED for any other word).
func categoryOf(s string) toolwirev1.ToolCategory {
	c := toolwirev1.ToolCategory_value["TOOL_CATEGORY_"+strings.ToUpper(s)]
	if s != strings.ToLower(s) {
		return toolwirev1.ToolCategory_TOOL_CATEGORY_UNSPECIFIED
	}
	return toolwirev1.ToolCategory(c)
}

// compileLatencyBudgets compiles the entries; their ids are unique
// among them.
func compileLatencyBudgets(dbs []docLatencyBudget, ps *problems) []*latencyBudget {
	var out []*latencyBudget
	ids := map[string]int{}
	for i := range dbs {
		db := &dbs[i]
		b := &latencyBudget{name: db.field, category: categoryOf(db.category), mode: db.mode, soft: db.soft}
		if db.id != "" {
			if first, dup := ids[db.id]; dup {
				ps.add(db.line, db.field+".id", "%q is already the id of the entry on line %d", db.id, first)
			}
			ids[db.id] = db.line
			b.name = db.id
		}
		for j, t := range db.tools {
			g, err := compileGlob(t.s)
			if err != nil {
				ps.add(t.line, fmt.Sprintf("%s.tools[%d]", db.field, j), "%v", err)
				continue
			}
			b.tools = append(b.tools, g)
		}
		if db.toolsSet && len(db.tools) == 0 {
			ps.add(db.line, db.field+".tools", "must not be empty (leave it out for every tool)")
		}
		if b.soft > 0 {
			out = append(out, b)
		}
	}
	return out
}

// canonicalLatencyBudgets renders the section for the canonical form (the
// entries in the document's order: which one is tightest does not depend
// on it, but an entry's default name does).
func canonicalLatencyBudgets(dbs []docLatencyBudget) []map[string]any {
	var out []map[string]any
	for _, db := range dbs {
		c := map[string]any{"soft": db.soft.String()}
		if db.id != "" {
			c["id"] = db.id
		}
		if db.toolsSet {
			ts := []string{}
			for _, t := range db.tools {
				ts = append(ts, t.s)
			}
			c["tools"] = ts
		}
		if db.category != "" {
			c["category"] = db.category
		}
		if db.mode != "" {
			c["mode"] = db.mode
		}
		out = append(out, c)
	}
	return out
}
