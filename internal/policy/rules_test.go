package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

func mustParse(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	return p
}

// CEL conditions see nested arguments, the caller and the tool (with
// MCP's defaults for unset annotations).
func TestCELConditions(t *testing.T) {
	t.Parallel()
	type call struct {
		args   string
		caller *toolwirev1.Caller
		tool   *toolwirev1.ToolSpec
		want   policy.Effect
	}
	plain := &toolwirev1.ToolSpec{Name: "gh_merge", Version: "v1"}
	for _, tc := range []struct {
		when  string
		calls []call
	}{
		{`args.repo.owner == "acme" && args.pr.labels.exists(l, l == "hotfix")`, []call{
			{`{"repo":{"owner":"acme"},"pr":{"labels":["x","hotfix"]}}`, caller, plain, policy.Deny},
			{`{"repo":{"owner":"acme"},"pr":{"labels":["x"]}}`, caller, plain, policy.Allow},
			{`{"repo":{"owner":"other"},"pr":{"labels":["hotfix"]}}`, caller, plain, policy.Allow},
		}},
		{`has(args.opts) && has(args.opts.force) && args.opts.force == true`, []call{
			{`{"opts":{"force":true}}`, caller, plain, policy.Deny},
			{`{"opts":{"force":false}}`, caller, plain, policy.Allow},
			{`{"opts":{}}`, caller, plain, policy.Allow},
			{`{}`, caller, plain, policy.Allow},
		}},
		{`args.count > 10 && args.ratio >= 0.5`, []call{ // ints and doubles compare across types
			{`{"count":11,"ratio":1}`, caller, plain, policy.Deny},
			{`{"count":11.0,"ratio":0.5}`, caller, plain, policy.Deny},
			{`{"count":10,"ratio":1}`, caller, plain, policy.Allow},
		}},
		{`args.files.all(f, f.path.startsWith("/tmp/"))`, []call{
			{`{"files":[{"path":"/tmp/a"},{"path":"/tmp/b"}]}`, caller, plain, policy.Deny},
			{`{"files":[{"path":"/tmp/a"},{"path":"/etc/b"}]}`, caller, plain, policy.Allow},
		}},
		{`caller.tenant == "acme" && caller.session.startsWith("prod-") && "deployer" in caller.scopes`, []call{
			{`{}`, &toolwirev1.Caller{Tenant: "acme", Session: "prod-1", Scopes: []string{"deployer"}}, plain, policy.Deny},
			{`{}`, &toolwirev1.Caller{Tenant: "acme", Session: "dev-1", Scopes: []string{"deployer"}}, plain, policy.Allow},
			{`{}`, nil, plain, policy.Allow},
		}},
		{`tool.annotations.destructive && tool.annotations.open_world && !tool.annotations.read_only`, []call{
			{`{}`, caller, plain, policy.Deny}, // unset: MCP's defaults
			{`{}`, caller, &toolwirev1.ToolSpec{Name: "gh_merge", Annotations: &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true)}}, policy.Allow},
			{`{}`, caller, &toolwirev1.ToolSpec{Name: "gh_merge", Annotations: &toolwirev1.ToolAnnotations{Destructive: proto.Bool(false)}}, policy.Allow},
			{`{}`, caller, &toolwirev1.ToolSpec{Name: "gh_merge", Annotations: &toolwirev1.ToolAnnotations{OpenWorld: proto.Bool(false)}}, policy.Allow},
		}},
		{`tool.category == "action" && tool.executor == "http" && tool.version == "v2" && tool.annotations.requires_approval && tool.name.startsWith("gh_") && tool.provider == "builtin" && "repo" in tool.scopes`, []call{
			{`{}`, caller, &toolwirev1.ToolSpec{Name: "gh_merge", Version: "v2", Category: toolwirev1.ToolCategory_TOOL_CATEGORY_ACTION, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, RequiresApproval: true, Provider: "builtin", Scopes: []string{"repo"}}, policy.Deny},
			{`{}`, caller, &toolwirev1.ToolSpec{Name: "gh_merge", Version: "v2", Category: toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, RequiresApproval: true, Provider: "builtin", Scopes: []string{"repo"}}, policy.Ask}, // no match; the spec asks
		}},
		{`args.path.lowerAscii().contains("secret") || args.path.matches("[.]pem$")`, []call{
			{`{"path":"/x/SECRET/y"}`, caller, plain, policy.Deny},
			{`{"path":"/x/key.pem"}`, caller, plain, policy.Deny},
			{`{"path":"/x/key.txt"}`, caller, plain, policy.Allow},
		}},
		{`sets.intersects(caller.scopes, ["admin", "root"])`, []call{
			{`{}`, &toolwirev1.Caller{Scopes: []string{"x", "root"}}, plain, policy.Deny},
			{`{}`, &toolwirev1.Caller{Scopes: []string{"x"}}, plain, policy.Allow},
		}},
	} {
		doc := fmt.Sprintf("tenant:\n  rules:\n    - id: r\n      effect: deny\n      tools: [gh_*]\n      when: %q\n", tc.when)
		p := mustParse(t, doc)
		for _, c := range tc.calls {
			d := p.Decide(policy.Input{Tool: c.tool, Args: mustArgs(c.args), Caller: c.caller})
			require.Equal(t, c.want, d.Outcome, "when %s, args %s, caller %v, tool %v", tc.when, c.args, c.caller, c.tool)
			require.Empty(t, d.Errors, tc.when)
		}
	}
}

// A condition that cannot be evaluated (cost limit, missing key, wrong
// type) fails closed: a deny or ask rule counts as matching, an allow
// rule as not matching; the decision records why.
func TestCELFailsClosed(t *testing.T) {
	t.Parallel()
	expensive := `args.items.all(x, args.items.all(y, args.items.all(z, x + y + z != "")))`
	items := make([]string, 60)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprint(i))
	}
	bigArgs := mustArgs(`{"items":[` + strings.Join(items, ",") + `]}`)
	smallArgs := mustArgs(`{"items":["a","b"]}`)
	for _, tc := range []struct {
		name, when string
		args       *policy.Args
		err        string
	}{
		{"cost limit", expensive, bigArgs, "cost limit exceeded"},
		{"missing key", `args.recursive == true`, mustArgs(`{}`), "no such key"},
		{"wrong type", `args.n > 5`, mustArgs(`{"n":"five"}`), "no such overload"},
	} {
		for _, effect := range []policy.Effect{policy.Deny, policy.Ask, policy.Allow} {
			doc := fmt.Sprintf("tenant:\n  default: ask\n  rules:\n    - {id: r, effect: %s, tools: [x], when: %q, reason: because}\n", effect, tc.when)
			p := mustParse(t, doc)
			start := time.Now()
			d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "x"}, Args: tc.args, Caller: caller})
			took := time.Since(start)
			require.Len(t, d.Errors, 1, tc.name)
			require.Equal(t, "r", d.Errors[0].ID)
			require.Contains(t, d.Errors[0].Err, tc.err, tc.name)
			switch effect {
			case policy.Deny:
				require.Equal(t, policy.Deny, d.Outcome, tc.name)
				require.Equal(t, "r", d.RuleID())
				require.Equal(t, "because", d.Reason())
				require.Contains(t, d.Matched[0].Err, tc.err)
			case policy.Ask:
				require.Equal(t, policy.Ask, d.Outcome, tc.name)
				require.Equal(t, "r", d.RuleID())
			case policy.Allow:
				require.Equal(t, policy.Ask, d.Outcome, "%s: the allow rule does not count, the default asks", tc.name)
				require.Empty(t, d.Matched)
			}
			if tc.name == "cost limit" {
				t.Logf("%s rule stopped by the cost limit in %v", effect, took)
			}
			x := p.Explain(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "x"}, Args: tc.args, Caller: caller})
			require.Contains(t, x.String(), "fail closed", tc.name)
		}
	}
	// The same expensive condition on small arguments evaluates.
	p := mustParse(t, fmt.Sprintf("tenant:\n  rules:\n    - {id: r, effect: deny, tools: [x], when: %q}\n", expensive))
	d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "x"}, Args: smallArgs})
	require.Equal(t, policy.Deny, d.Outcome)
	require.Empty(t, d.Errors)
}

// Argument globs reach into nested objects and arrays; a deny or ask
// rule matches when some value there matches, an allow rule only when
// every value does (and there is one), and never a value with a ".."
// segment.
func TestArgumentGlobs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `tenant:
  default: deny
  rules:
    - id: no-etc
      effect: deny
      tools: ["fs_*"]
      args: {path: "/etc/**"}
    - id: ask-other-owners
      effect: ask
      tools: [gh_*]
      args: {repo.owner: "ext-*", files.path: "**.go"}
    - id: gh-acme
      effect: allow
      tools: [gh_*]
      args: {repo.owner: "acme-*"}
    - id: tmp-only
      effect: allow
      tools: ["fs_*"]
      args: {path: "/tmp/**"}
    - id: exact
      effect: allow
      tools: [flags]
      args: {force: false, level: 2, note: null}
`)
	for _, tc := range []struct {
		tool, args string
		want       policy.Effect
	}{
		{"fs_read", `{"path":"/tmp/x"}`, policy.Allow},
		{"fs_read", `{"path":"/tmp"}`, policy.Allow},
		{"fs_read", `{"path":"/etc/passwd"}`, policy.Deny},
		{"fs_read", `{"path":"/etc"}`, policy.Deny},
		{"fs_read", `{"path":["/tmp/a","/etc/shadow"]}`, policy.Deny}, // some value matches the deny
		{"fs_read", `{"path":["/tmp/a","/var/x"]}`, policy.Deny},      // not every value matches the allow: default
		{"fs_read", `{"path":["/tmp/a","/tmp/b"]}`, policy.Allow},
		{"fs_read", `{"path":[]}`, policy.Deny},              // no value: the allow does not match
		{"fs_read", `{}`, policy.Deny},                       // missing: neither matches, default
		{"fs_read", `{"path":5}`, policy.Deny},               // not a string
		{"fs_read", `{"path":"/tmp/../etc/x"}`, policy.Deny}, // .. never matches an allow
		{"fs_read", `{"path":{"a":"/tmp/x"}}`, policy.Deny},
		{"gh_merge", `{"repo":{"owner":"acme-web"}}`, policy.Allow},
		{"gh_merge", `{"repo":{"owner":"acme"}}`, policy.Deny},
		{"gh_merge", `{"repo":{"owner":"evil"}}`, policy.Deny},
		{"gh_merge", `{"repo":[{"owner":"acme-a"},{"owner":"acme-b"}]}`, policy.Allow},
		{"gh_merge", `{"repo":[{"owner":"acme-a"},{"name":"x"}]}`, policy.Deny},
		{"gh_merge", `{"repo":{"owner":"ext-x"},"files":[{"path":"a.txt"},{"path":"src/main.go"}]}`, policy.Ask},
		{"gh_merge", `{"repo":{"owner":"ext-x"},"files":[{"path":"a.txt"}]}`, policy.Deny},
		{"flags", `{"force":false,"level":2.0,"note":null}`, policy.Allow},
		{"flags", `{"force":"false","level":2,"note":null}`, policy.Deny},
		{"flags", `{"force":false,"level":2}`, policy.Deny},
		{"flags", `{"force":false,"level":3,"note":null}`, policy.Deny},
	} {
		d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: tc.tool}, Args: mustArgs(tc.args), Caller: caller})
		require.Equal(t, tc.want, d.Outcome, "%s %s: %s", tc.tool, tc.args, summary(d))
	}
}

func TestToolGlobs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `tenant:
  rules:
    - {id: mcp-gh, effect: ask, tools: ["mcp__github__*"]}
    - {id: shells, effect: deny, tools: ["*shell*", "exec_?"]}
    - {id: classes, effect: deny, tools: ["db_[!r]*"]}
`)
	for tool, want := range map[string]policy.Effect{
		"mcp__github__create_issue": policy.Ask,
		"mcp__gitlab__create_issue": policy.Allow,
		"run_shell":                 policy.Deny,
		"shell":                     policy.Deny,
		"exec_a":                    policy.Deny,
		"exec_ab":                   policy.Allow,
		"db_write":                  policy.Deny,
		"db_read":                   policy.Allow,
	} {
		d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: tool}, Caller: caller})
		require.Equal(t, want, d.Outcome, tool)
	}
}

// A document whose own tests fail is refused by RunTests, which names
// the test (index, name, line), the tool, the expected and the actual
// outcome and what decided it.
func TestRunTests(t *testing.T) {
	t.Parallel()
	doc := `tenant:
  default: allow
  rules:
    - {id: no-etc, effect: deny, tools: ["fs_*"], args: {path: "/etc/**"}, reason: system files}
    - {id: ask-destructive, effect: ask, tools: ["*"], when: "tool.annotations.destructive"}
tests:
  - name: etc is off limits
    tool: fs_read
    args: {path: /etc/passwd}
    expect: deny
  - name: reading tmp is fine
    tool: fs_read
    args: {path: /tmp/x}
    expect: allow
  - tool: fs_read
    args: {path: /tmp/x}
    annotations: {read_only: true}
    expect: allow
  - tool: gate
    annotations: {read_only: true}
    requires_approval: true
    expect: ask
`
	p := mustParse(t, doc)
	err := p.RunTests(nil)
	require.ErrorIs(t, err, policy.ErrTestsFailed)
	var te *policy.TestsError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 4, te.Total)
	require.Len(t, te.Failures, 1)
	f := te.Failures[0]
	require.Equal(t, 1, f.Index)
	require.Equal(t, "reading tmp is fine", f.Name)
	require.Equal(t, 11, f.Line)
	require.Equal(t, policy.Allow, f.Expect)
	require.Equal(t, policy.Ask, f.Got)
	require.Contains(t, err.Error(), `line 11: tests[1] "reading tmp is fine": fs_read: expected allow, got ask (tenant rule "ask-destructive" (line 5))`)

	// With the registry's spec (read-only), the same test passes.
	lookup := func(name string) *toolwirev1.ToolSpec {
		if name == "fs_read" {
			return &toolwirev1.ToolSpec{Name: "fs_read", Annotations: &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true)}}
		}
		return nil
	}
	require.NoError(t, p.RunTests(lookup))
	require.Nil(t, lookup("fs_read").Annotations.Destructive, "the registry's spec is not modified")
}
