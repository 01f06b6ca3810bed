package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// problems parses doc and returns the problems of its refusal.
func problems(t *testing.T, doc string) []policy.Problem {
	t.Helper()
	_, err := policy.Parse([]byte(doc))
	require.Error(t, err)
	require.ErrorIs(t, err, policy.ErrInvalid)
	var ie *policy.InvalidError
	require.True(t, errors.As(err, &ie), "%T", err)
	return ie.Problems
}

// requireProblem checks that one problem is at line and its text holds
// every one of parts.
func requireProblem(t *testing.T, ps []policy.Problem, line int, parts ...string) {
	t.Helper()
	for _, p := range ps {
		s := p.String()
		ok := p.Line == line
		for _, part := range parts {
			ok = ok && strings.Contains(s, part)
		}
		if ok {
			return
		}
	}
	t.Fatalf("no problem at line %d with %q in %v", line, parts, ps)
}

// Every kind of bad document is refused, each problem naming its line
// and field; one refusal names all the problems of a document.
func TestParseRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		doc   string
		line  int
		parts []string
	}{
		{"unknown top field", "tenant: {}\nhook: {}\n", 2, []string{"hook", "unknown field", "known: agents, hooks, latency_budgets, limits, loop_guard, model_families, modes, sessions, tenant, tests, toolsets"}},
		{"unknown rule field", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      tool: y\n", 6, []string{"tenant.rules[0].tool", "unknown field"}},
		{"duplicate id in one layer", "tenant:\n  rules:\n    - {id: a, effect: deny, tools: [x]}\n    - {id: a, effect: allow, tools: [y]}\n", 4, []string{"tenant.rules[1].id", `"a" is already used at line 3`}},
		{"duplicate id across layers", "tenant:\n  rules:\n    - {id: a, effect: deny, tools: [x]}\nagents:\n  bot:\n    rules:\n      - {id: a, effect: allow, tools: [y]}\n", 7, []string{"agents.bot.rules[0].id", "already used"}},
		{"missing id", "tenant:\n  rules:\n    - {effect: deny, tools: [x]}\n", 3, []string{"tenant.rules[0].id", "is required"}},
		{"empty id", "tenant:\n  rules:\n    - {id: '', effect: deny, tools: [x]}\n", 3, []string{"tenant.rules[0].id", "must not be empty"}},
		{"bad id", "tenant:\n  rules:\n    - {id: 'no spaces', effect: deny, tools: [x]}\n", 3, []string{"not a rule id"}},
		{"missing effect", "tenant:\n  rules:\n    - {id: a, tools: [x]}\n", 3, []string{"tenant.rules[0].effect", "is required"}},
		{"bad effect", "tenant:\n  rules:\n    - id: a\n      effect: block\n      tools: [x]\n", 4, []string{"must be allow, ask or deny", `"block"`}},
		{"missing tools", "tenant:\n  rules:\n    - {id: a, effect: deny}\n", 3, []string{"tenant.rules[0].tools", "is required"}},
		{"empty tools", "tenant:\n  rules:\n    - {id: a, effect: deny, tools: []}\n", 3, []string{"at least one tool glob"}},
		{"tools not a list", "tenant:\n  rules:\n    - {id: a, effect: deny, tools: x}\n", 3, []string{"must be a list"}},
		{"bad tool glob", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools:\n        - ok\n        - '[x'\n", 7, []string{"tools[1]", "unterminated"}},
		{"bad args glob", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      args:\n        path: '[x'\n", 7, []string{"args.path", "unterminated"}},
		{"bad field path", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      args:\n        a..b: x\n", 7, []string{"empty part"}},
		{"args pattern a list", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      args:\n        path: [a, b]\n", 7, []string{"a pattern is a string"}},
		{"CEL syntax", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: args.x ==\n", 6, []string{"tenant.rules[0].when", `rule "a"`, "Syntax error"}},
		{"CEL syntax in a block", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: |\n        args.x == 1 &&\n        args.y ==\n        true\n        )\n", 10, []string{"Syntax error", "at line 4"}},
		{"CEL undeclared", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: request.x == 1\n", 6, []string{"undeclared reference", "request"}},
		{"CEL unknown field", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: tool.anotations.destructive\n", 6, []string{"undefined field 'anotations'"}},
		{"CEL caller field", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: caller.team == 'x'\n", 6, []string{"undefined field 'team'"}},
		{"CEL not bool", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: args.count + 1\n", 6, []string{"must be a bool"}},
		{"CEL dyn", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: args.force\n", 6, []string{"must be a bool", "args.force == true"}},
		{"CEL not a string", "tenant:\n  rules:\n    - id: a\n      effect: deny\n      tools: [x]\n      when: true\n", 6, []string{"when", "must be a string, not a boolean"}},
		{"bad default", "tenant:\n  default: block\n", 2, []string{"tenant.default", "must be allow, ask or deny"}},
		{"YAML 1.1 boolean is a string", "tenant:\n  default: yes\n", 2, []string{`not "yes"`}},
		{"duplicate key", "tenant:\n  default: deny\n  default: allow\n", 3, []string{"tenant.default", "given twice"}},
		{"duplicate agent", "agents:\n  bot: {}\n  bot: {}\n", 3, []string{"agents.bot", "given twice"}},
		{"empty agent name", "agents:\n  '': {}\n", 2, []string{"agent name must not be empty"}},
		{"agents a list", "agents:\n  - bot\n", 2, []string{"agents", "must be a mapping"}},
		{"alias", "tenant:\n  rules:\n    - &r {id: a, effect: deny, tools: [x]}\n    - *r\n", 4, []string{"aliases"}},
		{"YAML syntax", "tenant:\n  rules: [\n", 2, []string{"YAML"}},
		{"tab indentation", "tenant:\n\tdefault: deny\n", 2, []string{"YAML"}},
		{"two documents", "tenant: {}\n---\ntenant: {}\n", 2, []string{"one YAML document"}},
		{"not a mapping", "- a\n", 1, []string{"must be a mapping"}},
		{"test without expect", "tests:\n  - tool: x\n", 2, []string{"tests[0].expect", "is required"}},
		{"test bad expect", "tests:\n  - {tool: x, expect: maybe}\n", 2, []string{"tests[0].expect", "must be allow, ask or deny"}},
		{"test unknown caller field", "tests:\n  - tool: x\n    expect: allow\n    caller: {tenant: a, team: b}\n", 4, []string{"tests[0].caller.team", "unknown field"}},
		{"test args duplicate key", "tests:\n  - tool: x\n    expect: allow\n    args:\n      a: 1\n      a: 2\n", 6, []string{"tests[0].args.a", "given twice"}},
		{"test args infinity", "tests:\n  - tool: x\n    expect: allow\n    args: {n: .inf}\n", 4, []string{"not a number JSON can hold"}},
		{"test args not a mapping", "tests:\n  - tool: x\n    expect: allow\n    args: [1]\n", 4, []string{"tests[0].args", "must be a mapping"}},
		{"test requires_approval not bool", "tests:\n  - tool: x\n    expect: ask\n    requires_approval: yes\n", 4, []string{"must be true or false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, problems(t, tc.doc), tc.line, tc.parts...)
		})
	}
}

func TestParseNamesEveryProblem(t *testing.T) {
	t.Parallel()
	doc := `tenant:
  default: maybe
  rules:
    - id: a
      effect: deny
      tools: [x]
      when: args.x ==
    - id: a
      effect: allow
      tools: ['[']
      bogus: 1
`
	ps := problems(t, doc)
	requireProblem(t, ps, 2, "tenant.default")
	requireProblem(t, ps, 7, "Syntax error")
	requireProblem(t, ps, 8, "already used")
	requireProblem(t, ps, 10, "unterminated")
	requireProblem(t, ps, 11, "bogus")
	for i := 1; i < len(ps); i++ {
		require.LessOrEqual(t, ps[i-1].Line, ps[i].Line, "problems in line order")
	}
}

func TestParseRefusesLargeAndEmpty(t *testing.T) {
	t.Parallel()
	big := "tenant:\n  rules:\n" + strings.Repeat("# padding\n", policy.MaxDocumentBytes/10+1)
	requireProblem(t, problems(t, big), 0, "over the limit")
	for _, doc := range []string{"", "# nothing\n", "---\n", "null\n"} {
		requireProblem(t, problems(t, doc), problems(t, doc)[0].Line, "empty")
	}
}

// The version is the hash of a canonical form: the same whatever the
// key order, spacing, comments, quoting and flow or block style; another
// rule, reason or order of rules is another version.
func TestVersionIsCanonical(t *testing.T) {
	t.Parallel()
	a := `# the operator's policy
tenant:
  default: ask
  rules:
    - id: no-etc
      effect: deny
      tools: ["fs_*"]
      args: {path: "/etc/**", mode: 0x1F}
      reason: system files
tests:
  - {tool: fs_read, args: {path: /etc/x, n: 1.0}, expect: deny}
`
	b := `tests:
- expect: deny
  args:
    n: 1
    path: '/etc/x'
  tool: fs_read
tenant:
  rules:
  - reason: "system files"
    args:
      mode: 31
      path: /etc/**
    tools:
    - fs_*
    effect: deny
    id: no-etc
  default: ask
`
	pa, err := policy.Parse([]byte(a))
	require.NoError(t, err)
	pb, err := policy.Parse([]byte(b))
	require.NoError(t, err)
	require.Equal(t, pa.Version(), pb.Version())
	require.Equal(t, string(pa.Canonical()), string(pb.Canonical()))
	require.True(t, strings.HasPrefix(pa.Version(), "sha256:"))
	require.Len(t, pa.Version(), len("sha256:")+64)
	require.Equal(t, a, string(pa.Source()))

	for _, other := range []string{
		strings.Replace(a, "system files", "system files!", 1),
		strings.Replace(a, "default: ask", "default: deny", 1),
		strings.Replace(a, "expect: deny", "expect: ask", 1),
	} {
		po, err := policy.Parse([]byte(other))
		if err == nil {
			require.NotEqual(t, pa.Version(), po.Version(), other)
		}
	}
}

// YAML 1.2: yes, no, on, off, y and n are strings (a tool named "on", an
// argument "no"), never booleans.
func TestYAML12Scalars(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`tenant:
  rules:
    - id: on
      effect: deny
      tools: [on, off, y, n]
      args: {answer: no}
tests:
  - {tool: y, args: {answer: no}, expect: deny}
  - {tool: y, args: {answer: "false"}, expect: allow}
  - {tool: y, args: {answer: false}, expect: allow}
`))
	require.NoError(t, err)
	require.NoError(t, p.RunTests(nil))
	require.Equal(t, "on", p.Rules()[0].ID)
	require.Equal(t, []string{"on", "off", "y", "n"}, p.Rules()[0].Tools)
}

func TestRulesAndAgents(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(`agents:
  zed: {rules: [{id: z1, effect: deny, tools: [x]}]}
  amy: {default: deny, rules: [{id: b, effect: allow, tools: [x]}, {id: a, effect: allow, tools: [y], when: "caller.session != ''"}]}
tenant:
  rules: [{id: t, effect: ask, tools: ["*"], args: {n: 5, flag: true, none: null}, reason: why}]
`))
	require.NoError(t, err)
	require.Equal(t, []string{"amy", "zed"}, p.Agents())
	var names []string
	for _, r := range p.Rules() {
		names = append(names, r.Name())
	}
	require.Equal(t, []string{`tenant rule "t"`, `agent amy rule "a"`, `agent amy rule "b"`, `agent zed rule "z1"`}, names)
	r := p.Rules()[0]
	require.Equal(t, policy.LayerTenant, r.Layer)
	require.Equal(t, policy.Ask, r.Effect)
	require.Equal(t, "why", r.Reason)
	require.Equal(t, 5, r.Line)
	require.Equal(t, map[string]string{"n": "5", "flag": "true", "none": "null"}, r.Args)
	require.Equal(t, "caller.session != ''", p.Rules()[1].When)
	require.Equal(t, "amy", p.Rules()[1].Agent)
}

// FuzzParse: no document makes Parse panic; a document it accepts runs
// its tests, decides, explains and hides without panicking, and parsing
// it again gives the same version.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		starter, benchDoc(), "tenant: {default: deny}", "agents: {a: {rules: [{id: x, effect: ask, tools: ['*'], when: 'args.x == 1'}]}}",
		"tenant:\n  rules:\n    - {id: a, effect: deny, tools: [x], args: {a.b: '[a-', c: 1.5e3, d: null}}\n",
		"tests: [{tool: x, args: {a: [1, {b: 0x10}]}, caller: {scopes: [a]}, expect: allow}]", "&a [*a]", "{",
	} {
		f.Add([]byte(s))
	}
	args := mustArgs(`{"x":1,"path":"/etc/x","a":{"b":[1,"2"]}}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			require.ErrorIs(t, err, policy.ErrInvalid)
			return
		}
		_ = p.RunTests(nil)
		for _, tool := range []string{"x", "fs_read", ""} {
			in := policy.Input{Tool: &toolwirev1.ToolSpec{Name: tool}, Args: args, Caller: caller}
			d := p.Decide(in)
			require.NotZero(t, d.Outcome)
			x := p.Explain(in)
			require.Equal(t, d.Outcome, x.Decision.Outcome)
			_ = x.String()
			p.Hidden(tool, caller)
		}
		again, err := policy.Parse(data)
		require.NoError(t, err)
		require.Equal(t, p.Version(), again.Version())
		_, err = policy.Canonicalize(p.Canonical())
		require.NoError(t, err)
	})
}
