package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Hooks of a document (doc.go, "Hooks"): registered tools the dispatcher
// calls, through the fleet, on the calls of the tools they cover — before
// the policy rules decide (phase before), or on the response before it is
// stored (phase after).
//
//	hooks:
//	  - id: secrets
//	    phase: before        # before (admission) or after (the response)
//	    tool: scan_secrets   # the hook: any registered tool
//	    tools: ["*"]         # the calls it looks at
//	    priority: 10         # lower runs first; ties by id
//	    timeout: 2s          # default 5s, at most 1m
//	    failure: closed      # closed (default: refuse the call) or open
//
// Like the loop guard, hooks belong to the document, beside its layers:
// an agent layer cannot bind one.

// Bounds of hooks.
const (
	// MaxHooks bounds the hooks of a document.
	MaxHooks = 16
	// DefaultHookTimeout is a hook's timeout when the document names none.
	DefaultHookTimeout = 5 * time.Second
	// MaxHookTimeout bounds a hook's timeout.
	MaxHookTimeout = time.Minute
)

// Hook is one compiled hook binding.
type Hook struct {
	ID   string
	Tool string
	// After is true for an after-hook (phase after), false for a
	// before-hook.
	After    bool
	Priority int
	Timeout  time.Duration
	// FailOpen lets the call through when the hook fails or times out;
	// false (the default) refuses it.
	FailOpen bool
	tools    []*glob
}

// Covers reports whether the hook looks at calls of tool.
func (h *Hook) Covers(tool string) bool {
	for _, g := range h.tools {
		if g.match(tool) {
			return true
		}
	}
	return false
}

// BeforeHooks returns the before-hooks that look at calls of tool, in the
// order they run (priority, then id); none for a tool that is itself a
// hook of the document (hooks never run on hook calls).
func (p *Policy) BeforeHooks(tool string) []*Hook { return p.phaseHooks(tool, false) }

// AfterHooks returns the after-hooks that look at the responses of tool's
// calls, in the order they run; none for a hook's own tool.
func (p *Policy) AfterHooks(tool string) []*Hook { return p.phaseHooks(tool, true) }

func (p *Policy) phaseHooks(tool string, after bool) []*Hook {
	if p == nil || len(p.hooks) == 0 || p.IsHook(tool) {
		return nil
	}
	var out []*Hook
	for _, h := range p.hooks {
		if h.After == after && h.Covers(tool) {
			out = append(out, h)
		}
	}
	return out
}

// Hook returns the hook with id, or nil.
func (p *Policy) Hook(id string) *Hook {
	if p == nil {
		return nil
	}
	for _, h := range p.hooks {
		if h.ID == id {
			return h
		}
	}
	return nil
}

// IsHook reports whether tool is the tool of one of the document's hooks.
func (p *Policy) IsHook(tool string) bool {
	if p == nil {
		return false
	}
	for _, h := range p.hooks {
		if h.Tool == tool {
			return true
		}
	}
	return false
}

type docHook struct {
	field, id, phase, tool, failure string
	line, phaseLine, failureLine    int
	tools                           []docString
	priority                        int64
	timeout                         time.Duration
}

func (d decoder) hooks(n *yaml.Node) []docHook {
	var out []docHook
	d.seq(n, "hooks", func(i int, e *yaml.Node) {
		if i == MaxHooks {
			d.ps.add(e.Line, "hooks", "at most %d hooks", MaxHooks)
		}
		if i >= MaxHooks {
			return
		}
		f := fmt.Sprintf("hooks[%d]", i)
		h := docHook{field: f, line: e.Line}
		d.mapping(e, f, map[string]func(k, v *yaml.Node){
			"id":    func(_, v *yaml.Node) { h.id, _ = d.str(v, f+".id") },
			"phase": func(_, v *yaml.Node) { h.phase, _ = d.str(v, f+".phase"); h.phaseLine = v.Line },
			"tool":  func(_, v *yaml.Node) { h.tool, _ = d.str(v, f+".tool") },
			"tools": func(_, v *yaml.Node) {
				d.seq(v, f+".tools", func(i int, e *yaml.Node) {
					if s, ok := d.str(e, fmt.Sprintf("%s.tools[%d]", f, i)); ok {
						h.tools = append(h.tools, docString{s, e.Line})
					}
				})
			},
			"priority": func(_, v *yaml.Node) {
				if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
					d.ps.add(v.Line, f+".priority", "must be a whole number, not %s", describe(v))
					return
				}
				p, err := strconv.ParseInt(v.Value, 10, 32)
				if err != nil {
					d.ps.add(v.Line, f+".priority", "must be a whole number of 32 bits")
					return
				}
				h.priority = p
			},
			"timeout": func(_, v *yaml.Node) { h.timeout, _ = d.period(v, f+".timeout", time.Millisecond) },
			"failure": func(_, v *yaml.Node) { h.failure, _ = d.str(v, f+".failure"); h.failureLine = v.Line },
		}, []string{"id", "phase", "tool"})
		out = append(out, h)
	})
	return out
}

func compileHooks(dhs []docHook, ids map[string]int, ps *problems) []*Hook {
	var out []*Hook
	for i := range dhs {
		dh := &dhs[i]
		ok := claimID(dh.id, dh.line, dh.field, ids, ps)
		h := &Hook{ID: dh.id, Tool: dh.tool, Priority: int(dh.priority), Timeout: DefaultHookTimeout}
		switch dh.phase {
		case "before":
		case "after":
			h.After = true
		default:
			ps.add(dh.phaseLine, dh.field+".phase", "must be before or after, not %q", dh.phase)
			ok = false
		}
		if dh.tool == "" {
			ps.add(dh.line, dh.field+".tool", "must not be empty")
			ok = false
		}
		if dh.timeout > 0 {
			h.Timeout = min(dh.timeout, MaxHookTimeout)
			if dh.timeout > MaxHookTimeout {
				ps.add(dh.line, dh.field+".timeout", "at most %s", MaxHookTimeout)
				ok = false
			}
		}
		switch dh.failure {
		case "", "closed":
		case "open":
			h.FailOpen = true
		default:
			ps.add(dh.failureLine, dh.field+".failure", "must be closed or open, not %q", dh.failure)
			ok = false
		}
		var globsOK bool
		h.tools, globsOK = compileToolGlobs(dh.tools, dh.line, dh.field, ps)
		ok = ok && globsOK
		if ok {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *Hook) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func canonicalHooks(dhs []docHook) []map[string]any {
	var out []map[string]any
	for _, h := range dhs {
		c := map[string]any{"id": h.id, "phase": h.phase, "tool": h.tool}
		if len(h.tools) > 0 {
			tools := []string{}
			for _, t := range h.tools {
				tools = append(tools, t.s)
			}
			c["tools"] = tools
		}
		if h.priority != 0 {
			c["priority"] = h.priority
		}
		if h.timeout > 0 {
			c["timeout"] = h.timeout.String()
		}
		if h.failure != "" {
			c["failure"] = h.failure
		}
		out = append(out, c)
	}
	return out
}
