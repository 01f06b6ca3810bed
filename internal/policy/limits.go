package policy

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"go.yaml.in/yaml/v3"
)

// Limits of a document (doc.go, "Limits and budgets"): each entry counts
// the calls of the tools it covers per key, shared by every dispatcher
// replica (internal/limits), with any of a rate, a concurrency cap and a
// budget.
//
//	limits:
//	  - id: session-rate
//	    key: session            # tenant | agent | session | user | run | tool | chain, or a CEL string
//	    tools: ["*"]            # default: every tool
//	    rate: {count: 10, per: 1s, burst: 20}
//	    concurrency: 4
//	    wait: 2s                # a call over the cap waits this long for a slot (default 0: refused at once; at most 30s)
//	    budget: {units: 500, window: 24h}
//	    cost: 1                 # units a call spends: a number, or a CEL int (default 1)
//	    reason: ten calls a second per session

// Bounds of a limits entry.
const (
	// MaxLimits bounds the entries of a document.
	MaxLimits = 64
	// MaxConcurrency bounds a concurrency cap (internal/limits holds at
	// most this many holders on one key).
	MaxConcurrency = 1024
	// maxLimitUnits bounds a rate count, burst, budget and cost.
	maxLimitUnits = 1 << 30
	// maxLimitPeriod bounds a rate period and a budget window.
	maxLimitPeriod = 366 * 24 * time.Hour
	// MaxConcurrencyWait bounds how long a call over a concurrency cap
	// waits for a slot.
	MaxConcurrencyWait = 30 * time.Second
)

// The keys a limit may count per without CEL.
var limitKeys = []string{"tenant", "agent", "session", "user", "run", "tool", "chain"}

type docLimit struct {
	field, id, key, reason, cost string
	line, keyLine, costLine      int
	tools                        []docString
	rate                         *LimitRate
	rateLine                     int
	concurrency                  int64
	concLine                     int
	wait                         time.Duration
	waitLine                     int
	budget                       *LimitBudget
	budgetLine                   int
}

// LimitRate is a GCRA rate: Count units per Per on average, Burst at
// once.
type LimitRate struct {
	Count int64
	Per   time.Duration
	Burst int64
}

// LimitBudget is Units per Window (fixed windows aligned on the Unix
// epoch, UTC: a 24 h budget resets at midnight UTC).
type LimitBudget struct {
	Units  int64
	Window time.Duration
}

// Limit is one compiled limits entry.
type Limit struct {
	ID     string
	Line   int
	Reason string
	// Key is the key as written: one of tenant, agent, session, user, run,
	// tool, or a CEL expression.
	Key         string
	Rate        *LimitRate
	Concurrency int
	// Wait is how long a call over the concurrency cap waits for a slot
	// before it is refused (0: refused at once).
	Wait   time.Duration
	Budget *LimitBudget

	tools    []*glob
	keyExpr  cel.Program
	cost     int64
	costExpr cel.Program
}

// NeedsArgs reports whether the limit's key or cost reads the call's
// arguments (a CEL expression).
func (l *Limit) NeedsArgs() bool { return l.keyExpr != nil || l.costExpr != nil }

// Covers reports whether the limit applies to calls of tool.
func (l *Limit) Covers(tool string) bool {
	for _, g := range l.tools {
		if g.match(tool) {
			return true
		}
	}
	return false
}

// KeyOf returns the value the call is counted under (the tenant is always
// part of the count's key too); for the key chain, the call's delegation
// chain (its root call's id). A call without the field (no session, say)
// is counted under "" with every other such call of the tenant: leaving a
// field out never escapes a limit. A CEL key that cannot be evaluated, or
// is not a string, is an error: the caller refuses the call.
func (l *Limit) KeyOf(in *Input) (string, error) {
	c := in.Caller
	switch l.Key {
	case "tenant":
		return c.GetTenant(), nil
	case "agent":
		return c.GetAgent(), nil
	case "session":
		return c.GetSession(), nil
	case "user":
		return c.GetUser(), nil
	case "run":
		return c.GetRun(), nil
	case "tool":
		return in.Tool.GetName(), nil
	case "chain":
		// A delegated call counts under its chain's root; the root, a
		// call made on behalf of no other, under its own id: the chain's
		// calls share one count (docs/delegation.md).
		if root := c.GetRootCallId(); root != "" {
			return root, nil
		}
		return in.CallID, nil
	}
	out, _, err := l.keyExpr.Eval(newActivation(in))
	if err != nil {
		return "", fmt.Errorf("limit %q: key: %w", l.ID, err)
	}
	s, ok := out.(types.String)
	if !ok {
		return "", fmt.Errorf("limit %q: key gave %s, not a string", l.ID, out.Type())
	}
	return string(s), nil
}

// CostOf returns the units the call spends of the limit's rate and
// budget: at least 1.
func (l *Limit) CostOf(in *Input) (int64, error) {
	if l.costExpr == nil {
		return l.cost, nil
	}
	out, _, err := l.costExpr.Eval(newActivation(in))
	if err != nil {
		return 0, fmt.Errorf("limit %q: cost: %w", l.ID, err)
	}
	var n int64
	switch v := out.(type) {
	case types.Int:
		n = int64(v)
	case types.Uint:
		n = int64(min(uint64(v), math.MaxInt64))
	default:
		return 0, fmt.Errorf("limit %q: cost gave %s, not an int", l.ID, out.Type())
	}
	if n < 1 || n > maxLimitUnits {
		return 0, fmt.Errorf("limit %q: cost %d not in 1..%d", l.ID, n, maxLimitUnits)
	}
	return n, nil
}

// Limits returns the document's limits entries, sorted by id; nil for no
// policy.
func (p *Policy) Limits() []*Limit {
	if p == nil {
		return nil
	}
	return p.limits
}

// LimitsFor returns the limits entries that cover calls of tool.
func (p *Policy) LimitsFor(tool string) []*Limit {
	if p == nil || len(p.limits) == 0 {
		return nil
	}
	var out []*Limit
	for _, l := range p.limits {
		if l.Covers(tool) {
			out = append(out, l)
		}
	}
	return out
}

func (d decoder) limits(n *yaml.Node) []docLimit {
	var out []docLimit
	d.seq(n, "limits", func(i int, e *yaml.Node) {
		if i == MaxLimits {
			d.ps.add(e.Line, "limits", "at most %d entries", MaxLimits)
		}
		if i >= MaxLimits {
			return
		}
		out = append(out, d.limit(e, fmt.Sprintf("limits[%d]", i)))
	})
	return out
}

func (d decoder) limit(n *yaml.Node, field string) docLimit {
	l := docLimit{field: field, line: n.Line}
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"id":  func(_, v *yaml.Node) { l.id, _ = d.str(v, field+".id") },
		"key": func(_, v *yaml.Node) { l.key, _ = d.str(v, field+".key"); l.keyLine = v.Line },
		"tools": func(_, v *yaml.Node) {
			d.seq(v, field+".tools", func(i int, e *yaml.Node) {
				if s, ok := d.str(e, fmt.Sprintf("%s.tools[%d]", field, i)); ok {
					l.tools = append(l.tools, docString{s, e.Line})
				}
			})
		},
		"rate": func(_, v *yaml.Node) {
			r := &LimitRate{}
			l.rate, l.rateLine = r, v.Line
			f := field + ".rate"
			d.mapping(v, f, map[string]func(k, v *yaml.Node){
				"count": func(_, v *yaml.Node) { r.Count, _ = d.units(v, f+".count") },
				"per":   func(_, v *yaml.Node) { r.Per, _ = d.period(v, f+".per", time.Millisecond) },
				"burst": func(_, v *yaml.Node) { r.Burst, _ = d.units(v, f+".burst") },
			}, []string{"count", "per"})
		},
		"concurrency": func(_, v *yaml.Node) {
			l.concurrency, _ = d.units(v, field+".concurrency")
			l.concLine = v.Line
			if l.concurrency > MaxConcurrency {
				d.ps.add(v.Line, field+".concurrency", "at most %d", MaxConcurrency)
			}
		},
		"wait": func(_, v *yaml.Node) {
			l.wait, _ = d.period(v, field+".wait", time.Millisecond)
			l.waitLine = v.Line
		},
		"budget": func(_, v *yaml.Node) {
			b := &LimitBudget{}
			l.budget, l.budgetLine = b, v.Line
			f := field + ".budget"
			d.mapping(v, f, map[string]func(k, v *yaml.Node){
				"units":  func(_, v *yaml.Node) { b.Units, _ = d.units(v, f+".units") },
				"window": func(_, v *yaml.Node) { b.Window, _ = d.period(v, f+".window", time.Second) },
			}, []string{"units", "window"})
			if b.Window%time.Second != 0 {
				d.ps.add(v.Line, f+".window", "must be whole seconds")
			}
		},
		"cost": func(_, v *yaml.Node) {
			l.costLine = v.Line
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
				if n, ok := d.units(v, field+".cost"); ok {
					l.cost = strconv.FormatInt(n, 10)
				}
				return
			}
			l.cost, _ = d.str(v, field+".cost")
		},
		"reason": func(_, v *yaml.Node) { l.reason, _ = d.str(v, field+".reason") },
	}, []string{"id", "key"})
	return l
}

// units reads a whole number in 1..maxLimitUnits.
func (d decoder) units(n *yaml.Node, field string) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.ps.add(n.Line, field, "must be a whole number, not %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || v < 1 || v > maxLimitUnits {
		d.ps.add(n.Line, field, "must be a whole number from 1 to %d", maxLimitUnits)
		return 0, false
	}
	return v, true
}

// period reads a Go duration (1s, 10m, 24h) from least to 366 days.
func (d decoder) period(n *yaml.Node, field string, least time.Duration) (time.Duration, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return 0, false
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < least || v > maxLimitPeriod {
		d.ps.add(n.Line, field, "must be a duration from %s to 8784h (e.g. 1s, 10m, 24h), not %q", least, s)
		return 0, false
	}
	return v, true
}

// compileLimits compiles the entries; ids share the rules' namespace.
func compileLimits(dls []docLimit, ids map[string]int, ps *problems) []*Limit {
	var out []*Limit
	for i := range dls {
		if l := compileLimit(&dls[i], ids, ps); l != nil {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b *Limit) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// claimID records id (of an entry at line) as used, or says why it
// cannot be: rules, limits and hooks share one namespace.
func claimID(id string, line int, field string, ids map[string]int, ps *problems) bool {
	switch {
	case id == "":
		ps.add(line, field+".id", "must not be empty")
		return false
	case ids[id] != 0:
		ps.add(line, field+".id", "%q is already used at line %d", id, ids[id])
		return false
	}
	ids[id] = line
	return true
}

// compileToolGlobs compiles an entry's tools globs (every tool when it
// names none).
func compileToolGlobs(tools []docString, line int, field string, ps *problems) ([]*glob, bool) {
	if len(tools) == 0 {
		tools = []docString{{"*", line}}
	}
	ok := true
	var out []*glob
	for i, t := range tools {
		g, err := compileGlob(t.s)
		if err != nil {
			ps.add(t.line, fmt.Sprintf("%s.tools[%d]", field, i), "%v", err)
			ok = false
			continue
		}
		out = append(out, g)
	}
	return out, ok
}

func compileLimit(dl *docLimit, ids map[string]int, ps *problems) *Limit {
	ok := claimID(dl.id, dl.line, dl.field, ids, ps)
	l := &Limit{ID: dl.id, Line: dl.line, Reason: dl.reason, Key: dl.key, Rate: dl.rate, Budget: dl.budget,
		Concurrency: int(dl.concurrency), Wait: dl.wait, cost: 1}
	if dl.rate == nil && dl.concurrency == 0 && dl.budget == nil {
		ps.add(dl.line, dl.field, "needs a rate, a concurrency or a budget")
		ok = false
	}
	switch {
	case dl.wait > 0 && dl.concurrency == 0:
		ps.add(dl.waitLine, dl.field+".wait", "is the wait for a concurrency slot: it needs a concurrency")
		ok = false
	case dl.wait > MaxConcurrencyWait:
		ps.add(dl.waitLine, dl.field+".wait", "at most %s", MaxConcurrencyWait)
		ok = false
	}
	if r := dl.rate; r != nil {
		if r.Burst == 0 {
			r.Burst = r.Count
		}
		if r.Count > 0 && float64(r.Burst)*float64(r.Per)/float64(r.Count) > float64(maxLimitPeriod) {
			ps.add(dl.rateLine, dl.field+".rate", "a burst of %d at %d per %s spans more than 366 days", r.Burst, r.Count, r.Per)
			ok = false
		}
	}
	var globsOK bool
	l.tools, globsOK = compileToolGlobs(dl.tools, dl.line, dl.field, ps)
	ok = ok && globsOK
	if !slices.Contains(limitKeys, dl.key) && dl.key != "" {
		prg, err := compileExpr(dl.key, types.StringType)
		if err != nil {
			ps.add(dl.keyLine, dl.field+".key", "is not one of tenant, agent, session, user, run, tool, chain, nor a CEL string: %v", err)
			ok = false
		}
		l.keyExpr = prg
	}
	cost, constant := l.cost, true
	if dl.cost != "" {
		if n, err := strconv.ParseInt(dl.cost, 10, 64); err == nil {
			l.cost, cost = n, n
		} else {
			prg, err := compileExpr(dl.cost, types.IntType)
			if err != nil {
				ps.add(dl.costLine, dl.field+".cost", "is neither a whole number nor a CEL int: %v", err)
				ok = false
			}
			l.costExpr = prg
			cost, constant = constantInt(prg)
		}
	}
	if why := neverAdmits(l, cost); constant && why != "" {
		ps.add(dl.costLine, dl.field+".cost", "%s: no call would ever be admitted", why)
		ok = false
	}
	if !ok {
		return nil
	}
	return l
}

// constantInt evaluates prg when it reads no variable (its value is the
// same for every call): the value, and whether it is one.
func constantInt(prg cel.Program) (int64, bool) {
	if prg == nil {
		return 0, false
	}
	out, _, err := prg.Eval(map[string]any{})
	if err != nil {
		return 0, false // it reads a variable (or fails: the call is refused with why)
	}
	n, ok := out.Value().(int64)
	return n, ok
}

// neverAdmits says why a limit whose every call costs cost admits none
// (a cost outside 1..maxLimitUnits, above the rate's burst or the
// budget's units), "" when it may admit calls.
func neverAdmits(l *Limit, cost int64) string {
	switch {
	case l.Rate == nil && l.Budget == nil:
		return "" // a concurrency cap spends no units
	case cost < 1 || cost > maxLimitUnits:
		return fmt.Sprintf("every call costs %d, outside 1..%d", cost, maxLimitUnits)
	case l.Rate != nil && cost > l.Rate.Burst:
		return fmt.Sprintf("%d is above the burst %d", cost, l.Rate.Burst)
	case l.Budget != nil && cost > l.Budget.Units:
		return fmt.Sprintf("%d is above the budget's %d units", cost, l.Budget.Units)
	}
	return ""
}

// compileExpr compiles a CEL expression of type want over args, caller and
// tool, bounded by CostLimit when it runs.
func compileExpr(src string, want *types.Type) (cel.Program, error) {
	if len(src) > MaxWhenBytes {
		return nil, fmt.Errorf("longer than %d bytes", MaxWhenBytes)
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(want) {
		return nil, fmt.Errorf("must be a %s, not %s", want, ast.OutputType())
	}
	return env.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
}

// canonicalLimits renders the entries for the canonical form (document
// order).
func canonicalLimits(dls []docLimit) []map[string]any {
	var out []map[string]any
	for _, l := range dls {
		c := map[string]any{"id": l.id, "key": l.key}
		if len(l.tools) > 0 {
			tools := []string{}
			for _, t := range l.tools {
				tools = append(tools, t.s)
			}
			c["tools"] = tools
		}
		if r := l.rate; r != nil {
			c["rate"] = map[string]any{"count": r.Count, "per": r.Per.String(), "burst": r.Burst}
		}
		if l.concurrency > 0 {
			c["concurrency"] = l.concurrency
		}
		if l.wait > 0 {
			c["wait"] = l.wait.String()
		}
		if b := l.budget; b != nil {
			c["budget"] = map[string]any{"units": b.Units, "window": b.Window.String()}
		}
		if l.cost != "" {
			c["cost"] = l.cost
		}
		if l.reason != "" {
			c["reason"] = l.reason
		}
		out = append(out, c)
	}
	return out
}
