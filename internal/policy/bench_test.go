package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// benchDoc is a 50-rule policy: 30 tenant rules and 20 in the caller's
// agent layer; of them 20 apply to every tool ("*"), half with an args
// glob and half with a CEL condition, and 30 name specific tools by glob.
// The benchmark call is allowed: no deny matches, so every ask and allow
// rule that names the tool is evaluated.
func benchDoc() string {
	var b strings.Builder
	rule := func(indent string, id, effect, tools, extra string) {
		fmt.Fprintf(&b, "%s  - {id: %s, effect: %s, tools: [%s]%s}\n", indent, id, effect, tools, extra)
	}
	b.WriteString("tenant:\n  default: allow\n  rules:\n")
	for i := range 5 {
		rule("  ", fmt.Sprintf("t-args-deny-%d", i), "deny", `"*"`, fmt.Sprintf(`, args: {path: "/secret%d/**"}, reason: no`, i))
		rule("  ", fmt.Sprintf("t-cel-ask-%d", i), "ask", `"*"`, fmt.Sprintf(`, when: "has(args.size) && args.size > %d && tool.annotations.destructive"`, 1000+i))
	}
	for i := range 5 {
		rule("  ", fmt.Sprintf("t-nested-%d", i), "deny", `"*"`, fmt.Sprintf(`, args: {repo.owner: "evil-%d-*"}`, i))
		rule("  ", fmt.Sprintf("t-cel-deny-%d", i), "deny", `"*"`, fmt.Sprintf(`, when: "caller.session.startsWith('blocked-%d') || 'banned%d' in caller.scopes"`, i, i))
	}
	for i := range 10 {
		rule("  ", fmt.Sprintf("t-tool-%d", i), []string{"deny", "ask"}[i%2], fmt.Sprintf(`"tool_%d*", "mcp__srv%d__*"`, i, i), "")
	}
	b.WriteString("agents:\n  bot:\n    default: ask\n    rules:\n")
	for i := range 20 {
		switch {
		case i < 10:
			rule("    ", fmt.Sprintf("a-tool-%d", i), "allow", fmt.Sprintf(`"tool_%d", "other_%d_*"`, i, i), "")
		case i < 15:
			rule("    ", fmt.Sprintf("a-args-%d", i), "allow", `"fs_*"`, fmt.Sprintf(`, args: {path: "/data/**", repo.owner: "acme-*"}, when: "args.size < %d"`, 10000+i))
		default:
			rule("    ", fmt.Sprintf("a-deny-%d", i), "deny", `"fs_delete", "fs_chmod"`, "")
		}
	}
	return b.String()
}

func benchPolicy(tb testing.TB) *policy.Policy {
	tb.Helper()
	p, err := policy.Parse([]byte(benchDoc()))
	require.NoError(tb, err)
	require.Len(tb, p.Rules(), 50)
	return p
}

var benchRaw = []byte(`{"path":"/data/reports/q3.csv","size":512,"repo":{"owner":"acme-web","name":"site"},"mode":"overwrite"}`)

func BenchmarkDecide(b *testing.B) {
	tool := &toolwirev1.ToolSpec{Name: "fs_write", Version: "sha256:v1", Annotations: &toolwirev1.ToolAnnotations{}}
	c := &toolwirev1.Caller{Tenant: "acme", Agent: "bot", Session: "sess-1", Scopes: []string{"tools"}}
	args, err := policy.ParseArgs(benchRaw)
	require.NoError(b, err)
	p := benchPolicy(b)
	d := p.Decide(policy.Input{Tool: tool, Args: args, Caller: c})
	require.Equal(b, policy.Allow, d.Outcome, "%+v", d)
	require.Len(b, d.Matched, 5)
	require.Empty(b, d.Errors)

	b.Run("no-policy", func(b *testing.B) {
		var none *policy.Policy
		b.ReportAllocs()
		for b.Loop() {
			none.Decide(policy.Input{Tool: tool, Args: args, Caller: c})
		}
	})
	b.Run("50-rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Decide(policy.Input{Tool: tool, Args: args, Caller: c})
		}
	})
	b.Run("50-rules-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p.Decide(policy.Input{Tool: tool, Args: args, Caller: c})
			}
		})
	})
	b.Run("cost-limit-hit", func(b *testing.B) {
		// The worst a condition can cost: it runs until CostLimit stops it.
		items := make([]string, 60)
		for i := range items {
			items[i] = fmt.Sprintf("%q", fmt.Sprint(i))
		}
		big, err := policy.ParseArgs([]byte(`{"items":[` + strings.Join(items, ",") + `]}`))
		require.NoError(b, err)
		slow, err := policy.Parse([]byte(`tenant: {rules: [{id: slow, effect: deny, tools: ["*"], when: 'args.items.all(x, args.items.all(y, args.items.all(z, x + y + z != "")))'}]}`))
		require.NoError(b, err)
		in := policy.Input{Tool: tool, Args: big, Caller: c}
		require.Len(b, slow.Decide(in).Errors, 1)
		b.ReportAllocs()
		for b.Loop() {
			slow.Decide(in)
		}
	})
	b.Run("ParseArgs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.ParseArgs(benchRaw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Hidden", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Hidden("fs_write", c)
		}
	})
}
