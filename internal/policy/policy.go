package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Policy is a compiled policy document: its layers with their rules
// (globs compiled, CEL conditions compiled and type-checked), its tests
// and its version. It is immutable and safe for concurrent use; a new
// document is a new Policy. A nil *Policy is "no policy": every call is
// allowed, but for tools that require approval (see Decide).
type Policy struct {
	version   string
	source    []byte
	canonical []byte
	tenant    *layer
	agents    map[string]*layer
	agentList []string // sorted
	modes     map[string]*layer
	modeList  []string // sorted
	rules     []*RuleInfo
	tests     []docTest
	limits    []*Limit   // limits.go
	loop      *LoopGuard // loopguard.go; nil = off
	hooks     []*Hook    // hooks.go; in the order they run
	// latencybudgets.go; in the document's order
	budgets []*latencyBudget
	// sessions.go; the zero value without the section
	sessions SessionRules
	// anyPins: some layer says sessions.pin_versions (sessions.go).
	anyPins bool
	// toolsets.go: model_families in the document's order, toolsets by family
	families []modelFamily
	toolsets map[string]*Toolset
}

// RuleInfo describes one rule of a policy. Explain and the audit name a
// rule by its layer and id; Reason is the text a refused caller may see.
// Tools, Args and When are the rule's text, which may be private: show
// them to administrators only.
type RuleInfo struct {
	Layer  Layer  // LayerTenant or LayerAgent
	Agent  string // for LayerAgent: the agent whose layer holds the rule; for LayerMode: the mode
	ID     string
	Effect Effect
	Reason string
	Line   int // in the document

	Tools []string
	Args  map[string]string // field path → pattern as the document wrote it
	When  string
}

// Name renders the rule for people: `tenant rule "no-etc"`, `agent
// support-bot rule "ask-writes"`.
func (r *RuleInfo) Name() string {
	switch r.Layer {
	case LayerAgent:
		return fmt.Sprintf("agent %s rule %q", r.Agent, r.ID)
	case LayerMode:
		return fmt.Sprintf("mode %s rule %q", r.Agent, r.ID)
	}
	return fmt.Sprintf("tenant rule %q", r.ID)
}

// Version returns the policy's version, "sha256:" and the hex SHA-256 of
// its canonical form (see Canonical): the same on every replica for the
// same document, whatever its key order, spacing, comments or quoting.
func (p *Policy) Version() string {
	if p == nil {
		return ""
	}
	return p.version
}

// Source returns the document's text as given to Parse (comments and all).
// The caller must not modify it.
func (p *Policy) Source() []byte { return p.source }

// Canonical returns the canonical JSON form of the document that Version
// hashes: every field the document set (defaults and empty fields left
// out), object keys sorted, lists (rules, tools, tests) in document order.
// It is a stable text to diff two versions. The caller must not modify it.
func (p *Policy) Canonical() []byte { return p.canonical }

// Rules returns every rule: the tenant layer's, then the agent layers' by
// agent name, each layer's by id. The caller must not modify them.
func (p *Policy) Rules() []*RuleInfo {
	if p == nil {
		return nil
	}
	return p.rules
}

// Tests returns how many tests the document has (`tests:`).
func (p *Policy) Tests() int {
	if p == nil {
		return 0
	}
	return len(p.tests)
}

// Agents returns the agents that have a layer, sorted.
func (p *Policy) Agents() []string {
	if p == nil {
		return nil
	}
	return p.agentList
}

// layer is one compiled layer of a policy.
type layer struct {
	kind  Layer
	agent string
	def   Effect // 0: none
	rules []*rule
	// pinVersions: the layer's sessions.pin_versions (sessions.go).
	pinVersions bool

	// cache maps a tool name to the rules whose tools globs match it; a
	// copy-on-write map, so a lookup takes no lock and allocates nothing.
	cache   atomic.Pointer[map[string]*candidates]
	cacheMu sync.Mutex
}

// maxCachedTools bounds the tool names a layer caches candidates for;
// past it, candidates are computed on every call (correct, slower).
const maxCachedTools = 4096

// candidates are a layer's rules whose tools globs match one tool name,
// by effect, each list by id.
type candidates struct {
	by [Deny + 1][]*rule
	n  int
}

type rule struct {
	info  RuleInfo
	tools []*glob
	args  []*argPattern
	when  *condition // nil: no condition
}

// unconditional reports whether the rule has neither args nor when: its
// tools globs alone decide whether it applies.
func (r *rule) unconditional() bool { return len(r.args) == 0 && r.when == nil }

func (r *rule) matchesTool(name string) bool {
	for _, g := range r.tools {
		if g.match(name) {
			return true
		}
	}
	return false
}

func (l *layer) candidatesFor(name string) *candidates {
	if m := l.cache.Load(); m != nil {
		if c, ok := (*m)[name]; ok {
			return c
		}
	}
	c := &candidates{}
	for _, r := range l.rules {
		if r.matchesTool(name) {
			c.by[r.info.Effect] = append(c.by[r.info.Effect], r)
			c.n++
		}
	}
	if full := l.cache.Load(); full != nil && len(*full) >= maxCachedTools {
		return c // the cache is full: no lock, no copy
	}
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	old := l.cache.Load()
	if old == nil || len(*old) < maxCachedTools {
		next := make(map[string]*candidates, 1+lenOf(old))
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		next[name] = c
		l.cache.Store(&next)
	}
	return c
}

func lenOf(m *map[string]*candidates) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// layersFor returns the layers that apply to caller: the tenant layer,
// the caller's agent layer and its session's mode layer (each nil when the
// document has none).
func (p *Policy) layersFor(caller *toolwirev1.Caller) [3]*layer {
	var mode *layer
	if m := caller.GetMode(); m != "" {
		mode = p.modes[m]
	}
	return [3]*layer{p.tenant, p.agents[caller.GetAgent()], mode}
}

// ModeNameRE is what a mode's name may be.
var ModeNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Modes returns the modes the document declares (modes:), sorted.
func (p *Policy) Modes() []string {
	if p == nil {
		return nil
	}
	return p.modeList
}

// HasMode reports whether the document declares mode.
func (p *Policy) HasMode(mode string) bool {
	if p == nil {
		return false
	}
	_, ok := p.modes[mode]
	return ok
}

// ruleIDRE is what a rule id may be: it is named in audit records and
// answers, so it stays short and plain.
var ruleIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// Parse decodes and compiles a policy document (YAML; the format is in
// doc.go). It refuses, with an *InvalidError naming the line of each
// problem (errors.Is(err, ErrInvalid)), a document that is over
// MaxDocumentBytes, is not YAML, has unknown or repeated fields or
// values of the wrong type, a rule without id, effect or tools, a
// duplicate rule id, a bad glob or field path, or a `when` that does not
// compile or is not a bool. It does not run the document's tests: see
// RunTests.
func Parse(data []byte) (*Policy, error) {
	doc, ps := decodeDocument(data)
	if doc == nil {
		return nil, ps.err()
	}
	if n := celBytes(doc); n > MaxDocumentCELBytes {
		// Refused before compiling: compile time grows with the CEL, and
		// every replica compiles every document in force.
		ps.add(1, "document", "its CEL (when, key and cost) totals %d bytes; at most %d", n, MaxDocumentCELBytes)
		return nil, ps.err()
	}
	// Compile even when decoding found problems, so that one refusal
	// names them all.
	p := &Policy{source: slices.Clone(data), agents: map[string]*layer{}, modes: map[string]*layer{}}
	ids := map[string]int{} // id → line of its first use
	p.tenant = compileLayer(&doc.tenant, LayerTenant, "", ids, &ps)
	for _, a := range doc.agents {
		p.agents[a.name] = compileLayer(&a.layer, LayerAgent, a.name, ids, &ps)
		p.agentList = append(p.agentList, a.name)
	}
	slices.Sort(p.agentList)
	for _, m := range doc.modes {
		p.modes[m.name] = compileLayer(&m.layer, LayerMode, m.name, ids, &ps)
		p.modeList = append(p.modeList, m.name)
	}
	slices.Sort(p.modeList)
	p.anyPins = p.tenant.pinVersions
	for _, l := range p.agents {
		p.anyPins = p.anyPins || l.pinVersions
	}
	for _, l := range p.modes {
		p.anyPins = p.anyPins || l.pinVersions
	}
	p.limits = compileLimits(doc.limits, ids, &ps)
	p.loop = compileLoopGuard(doc.loop, &ps)
	p.hooks = compileHooks(doc.hooks, ids, &ps)
	p.budgets = compileLatencyBudgets(doc.budgets, &ps)
	p.sessions = compileSessions(doc.sessions, p.modes, &ps)
	p.families = compileModelFamilies(doc.families, &ps)
	p.toolsets = compileToolsets(doc.toolsets, &ps)
	for _, t := range doc.tests {
		if t.tool == "" {
			ps.add(t.line, t.field+".tool", "must not be empty")
		}
		if t.args != nil {
			if _, err := ParseArgs(t.args); err != nil {
				ps.add(t.argsLine, t.field+".args", "%v", err)
			}
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	p.tests = doc.tests
	for _, r := range p.tenant.rules {
		p.rules = append(p.rules, &r.info)
	}
	for _, name := range p.agentList {
		for _, r := range p.agents[name].rules {
			p.rules = append(p.rules, &r.info)
		}
	}
	for _, name := range p.modeList {
		for _, r := range p.modes[name].rules {
			p.rules = append(p.rules, &r.info)
		}
	}
	canon, err := canonicalDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("policy: canonical form: %w", err)
	}
	sum := sha256.Sum256(canon)
	p.canonical, p.version = canon, "sha256:"+hex.EncodeToString(sum[:])
	return p, nil
}

func compileLayer(dl *docLayer, kind Layer, agent string, ids map[string]int, ps *problems) *layer {
	l := &layer{kind: kind, agent: agent, def: dl.def, pinVersions: dl.sessions.pinVersions}
	for i := range dl.rules {
		if r := compileRule(&dl.rules[i], kind, agent, ids, ps); r != nil {
			l.rules = append(l.rules, r)
		}
	}
	slices.SortFunc(l.rules, func(a, b *rule) int { return cmp.Compare(a.info.ID, b.info.ID) })
	return l
}

func compileRule(dr *docRule, kind Layer, agent string, ids map[string]int, ps *problems) *rule {
	ok := true
	switch {
	case dr.id == "":
		ok = false
		if !hasField(ps, dr.field+".id") { // not already reported as missing or not a string
			ps.add(dr.line, dr.field+".id", "must not be empty")
		}
	case !ruleIDRE.MatchString(dr.id):
		ps.add(dr.line, dr.field+".id", "%q is not a rule id (letters, digits and _ . : / -, starting with a letter or digit, at most 128)", dr.id)
		ok = false
	default:
		if first, dup := ids[dr.id]; dup {
			ps.add(dr.line, dr.field+".id", "rule id %q is already used at line %d (ids are unique in the whole document)", dr.id, first)
			ok = false
		} else {
			ids[dr.id] = dr.line
		}
	}
	r := &rule{info: RuleInfo{
		Layer: kind, Agent: agent, ID: dr.id, Effect: dr.effect, Reason: dr.reason, Line: dr.line,
		When: dr.when,
	}}
	if dr.effect == 0 {
		ok = false
	}
	if len(dr.tools) == 0 && !hasField(ps, dr.field+".tools") {
		ps.add(dr.line, dr.field+".tools", "must name at least one tool glob (\"*\" for every tool)")
		ok = false
	}
	for i, t := range dr.tools {
		g, err := compileGlob(t.s)
		if err != nil {
			ps.add(t.line, fmt.Sprintf("%s.tools[%d]", dr.field, i), "%v", err)
			ok = false
			continue
		}
		r.tools = append(r.tools, g)
		r.info.Tools = append(r.info.Tools, t.s)
	}
	for _, a := range dr.args {
		ap, err := compileArgPattern(a.field, a.pattern)
		if err != nil {
			ps.add(a.line, dr.field+".args."+a.field, "%v", err)
			ok = false
			continue
		}
		r.args = append(r.args, ap)
		if r.info.Args == nil {
			r.info.Args = map[string]string{}
		}
		r.info.Args[a.field] = ap.patternText()
	}
	if dr.when != "" {
		prg, cps := compileWhen(dr.when)
		for _, cp := range cps {
			ps.add(whenLine(dr, cp.line), dr.field+".when", "rule %q: CEL: %s%s", dr.id, cp.msg, celWhere(cp))
			ok = false
		}
		r.when = prg
	}
	if !ok {
		return nil
	}
	return r
}

// hasField reports whether a problem was already recorded for field.
func hasField(ps *problems, field string) bool {
	for _, p := range *ps {
		if p.Field == field {
			return true
		}
	}
	return false
}

// whenLine maps a line within a condition to a line of the document: a
// literal block (|) starts on the line after its indicator; other styles
// are reported at the condition's first line.
func whenLine(dr *docRule, celLine int) int {
	if dr.whenStyle&yamlLiteral != 0 && celLine > 0 {
		return dr.whenLine + celLine
	}
	return dr.whenLine
}

func celWhere(cp celProblem) string {
	if cp.line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (at line %d, column %d of the condition)", cp.line, cp.col+1)
}

// canonicalDocument renders the decoded document as canonical JSON.
func canonicalDocument(doc *document) ([]byte, error) {
	type cRule struct {
		ID     string         `json:"id"`
		Effect string         `json:"effect"`
		Tools  []string       `json:"tools"`
		Args   map[string]any `json:"args,omitempty"`
		When   string         `json:"when,omitempty"`
		Reason string         `json:"reason,omitempty"`
	}
	type cLayer struct {
		Default  string         `json:"default,omitempty"`
		Rules    []cRule        `json:"rules,omitempty"`
		Sessions map[string]any `json:"sessions,omitempty"` // sessions.go
	}
	type cCaller struct {
		Tenant  string   `json:"tenant,omitempty"`
		Agent   string   `json:"agent,omitempty"`
		Session string   `json:"session,omitempty"`
		User    string   `json:"user,omitempty"`
		Run     string   `json:"run,omitempty"`
		Mode    string   `json:"mode,omitempty"`
		Turn    string   `json:"turn,omitempty"`
		Scopes  []string `json:"scopes,omitempty"`
		// toolsets.go
		Model       string `json:"model,omitempty"`
		ModelFamily string `json:"model_family,omitempty"`
	}
	type cAnnotations struct {
		ReadOnly    *bool `json:"read_only,omitempty"`
		Destructive *bool `json:"destructive,omitempty"`
		Idempotent  *bool `json:"idempotent,omitempty"`
		OpenWorld   *bool `json:"open_world,omitempty"`
	}
	type cTest struct {
		Name             string          `json:"name,omitempty"`
		Tool             string          `json:"tool"`
		Args             json.RawMessage `json:"args,omitempty"`
		Caller           *cCaller        `json:"caller,omitempty"`
		Expect           string          `json:"expect"`
		RequiresApproval *bool           `json:"requires_approval,omitempty"`
		Annotations      *cAnnotations   `json:"annotations,omitempty"`
	}
	type cDoc struct {
		Tenant *cLayer            `json:"tenant,omitempty"`
		Agents map[string]*cLayer `json:"agents,omitempty"`
		Modes  map[string]*cLayer `json:"modes,omitempty"`
		Tests  []cTest            `json:"tests,omitempty"`
		Limits []map[string]any   `json:"limits,omitempty"`
		Loop   map[string]any     `json:"loop_guard,omitempty"`
		Hooks  []map[string]any   `json:"hooks,omitempty"`
		// latencybudgets.go
		Budgets []map[string]any `json:"latency_budgets,omitempty"`
		// sessions.go
		Sessions map[string]any `json:"sessions,omitempty"`
		// toolsets.go
		Families []map[string]any `json:"model_families,omitempty"`
		Toolsets map[string]any   `json:"toolsets,omitempty"`
	}
	layerOf := func(dl *docLayer) *cLayer {
		cl := &cLayer{}
		if dl.def != 0 {
			cl.Default = dl.def.String()
		}
		for _, r := range dl.rules {
			cr := cRule{ID: r.id, Effect: r.effect.String(), When: r.when, Reason: r.reason, Tools: []string{}}
			for _, t := range r.tools {
				cr.Tools = append(cr.Tools, t.s)
			}
			for _, a := range r.args {
				if cr.Args == nil {
					cr.Args = map[string]any{}
				}
				cr.Args[a.field] = a.pattern
			}
			cl.Rules = append(cl.Rules, cr)
		}
		cl.Sessions = dl.sessions.canonical()
		if cl.Default == "" && len(cl.Rules) == 0 && cl.Sessions == nil {
			return nil
		}
		return cl
	}
	var cd cDoc
	cd.Tenant = layerOf(&doc.tenant)
	cd.Limits = canonicalLimits(doc.limits)
	cd.Loop = canonicalLoop(doc.loop)
	cd.Hooks = canonicalHooks(doc.hooks)
	cd.Budgets = canonicalLatencyBudgets(doc.budgets)
	cd.Sessions = canonicalSessions(doc.sessions)
	cd.Families = canonicalModelFamilies(doc.families)
	cd.Toolsets = canonicalToolsets(doc.toolsets)
	for _, a := range doc.agents {
		if cd.Agents == nil {
			cd.Agents = map[string]*cLayer{}
		}
		cl := layerOf(&a.layer)
		if cl == nil {
			cl = &cLayer{}
		}
		cd.Agents[a.name] = cl
	}
	for _, m := range doc.modes {
		if cd.Modes == nil {
			cd.Modes = map[string]*cLayer{}
		}
		cl := layerOf(&m.layer)
		if cl == nil {
			cl = &cLayer{}
		}
		cd.Modes[m.name] = cl
	}
	for _, t := range doc.tests {
		ct := cTest{Name: t.name, Tool: t.tool, Expect: t.expect.String(), RequiresApproval: t.requiresApproval}
		if t.args != nil {
			c, err := Canonicalize(t.args)
			if err != nil {
				return nil, err
			}
			if string(c) != "{}" {
				ct.Args = c
			}
		}
		if c := t.caller; c != nil {
			cc := cCaller{Tenant: c.Tenant, Agent: c.Agent, Session: c.Session, User: c.User, Run: c.Run, Mode: c.Mode, Turn: c.Turn, Scopes: c.Scopes,
				Model: c.Model, ModelFamily: c.ModelFamily}
			if !reflect.ValueOf(cc).IsZero() {
				ct.Caller = &cc
			}
		}
		if a := t.annotations; a != nil {
			ca := cAnnotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
			if ca != (cAnnotations{}) {
				ct.Annotations = &ca
			}
		}
		cd.Tests = append(cd.Tests, ct)
	}
	b, err := json.Marshal(cd)
	if err != nil {
		return nil, err
	}
	return Canonicalize(b)
}

// MaxDocumentCELBytes bounds the CEL of one document (every when, and
// every CEL key and cost of its limits): with MaxWhenBytes and
// MaxWhenDepth it bounds how long a document takes to compile, on the
// replica that applies it and on every other: the slowest conditions
// found (map literals nested 30 deep, 160 bytes) compile in about 4 ms, so
// a document of nothing else compiles in under a second on an idle core.
const MaxDocumentCELBytes = 32 << 10

// celBytes is the size of doc's CEL.
func celBytes(doc *document) int {
	n := 0
	layers := []*docLayer{&doc.tenant}
	for i := range doc.agents {
		layers = append(layers, &doc.agents[i].layer)
	}
	for i := range doc.modes {
		layers = append(layers, &doc.modes[i].layer)
	}
	for _, l := range layers {
		for _, r := range l.rules {
			n += len(r.when)
		}
	}
	for _, l := range doc.limits {
		n += len(l.key) + len(l.cost)
	}
	return n
}
