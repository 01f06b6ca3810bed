package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policy/policytest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// benchDoc is the 50-rule policy (policytest.FiftyRules) with the
// caller's agent layer "bot".
func benchDoc() string { return policytest.FiftyRules("bot") }

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
