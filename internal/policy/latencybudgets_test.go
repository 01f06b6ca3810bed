package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The tightest budget that applies holds: the spec's own or a policy
// entry's, selected by tool glob, category and (once sessions have modes)
// mode.
func TestLatencyBudgetForTightestApplies(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `
tenant: {default: allow}
latency_budgets:
  - id: voice-retrieval
    category: retrieval
    mode: voice
    soft: 800ms
  - id: text-retrieval
    category: retrieval
    mode: text
    soft: 2s
  - tools: ["slow_*"]
    soft: 5s
  - category: action
    soft: 3s
`)
	spec := func(name string, c toolwirev1.ToolCategory, own time.Duration) *toolwirev1.ToolSpec {
		s := &toolwirev1.ToolSpec{Name: name, Category: c}
		if own > 0 {
			s.Timeouts = &toolwirev1.Timeouts{LatencyBudget: durationpb.New(own)}
		}
		return s
	}
	retrieval := toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL
	for _, tc := range []struct {
		name   string
		spec   *toolwirev1.ToolSpec
		mode   string
		want   time.Duration
		source string
		entry  string
	}{
		{"voice mode", spec("search", retrieval, 0), "voice", 800 * time.Millisecond, policy.BudgetFromPolicy, "voice-retrieval"},
		{"text mode", spec("search", retrieval, 0), "text", 2 * time.Second, policy.BudgetFromPolicy, "text-retrieval"},
		{"no mode known: mode entries never apply", spec("search", retrieval, 0), "", 0, "", ""},
		{"spec tighter than policy", spec("search", retrieval, 300*time.Millisecond), "text", 300 * time.Millisecond, policy.BudgetFromSpec, ""},
		{"policy tighter than spec", spec("search", retrieval, 3*time.Second), "voice", 800 * time.Millisecond, policy.BudgetFromPolicy, "voice-retrieval"},
		{"glob, unnamed entry", spec("slow_report", toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY, 0), "", 5 * time.Second, policy.BudgetFromPolicy, "latency_budgets[2]"},
		{"category", spec("send", toolwirev1.ToolCategory_TOOL_CATEGORY_ACTION, 0), "voice", 3 * time.Second, policy.BudgetFromPolicy, "latency_budgets[3]"},
	} {
		b, ok := p.LatencyBudgetFor(tc.spec, tc.mode)
		require.Equal(t, tc.want > 0, ok, tc.name)
		require.Equal(t, tc.want, b.Soft, tc.name)
		require.Equal(t, tc.source, b.Source, tc.name)
		require.Equal(t, tc.entry, b.Entry, tc.name)
		if tc.source == policy.BudgetFromPolicy {
			require.Equal(t, p.Version(), b.PolicyVersion, tc.name)
		}
	}
	// No policy: the spec's own budget, or none.
	var none *policy.Policy
	b, ok := none.LatencyBudgetFor(spec("x", 0, time.Second), "")
	require.True(t, ok)
	require.Equal(t, policy.LatencyBudget{Soft: time.Second, Source: policy.BudgetFromSpec}, b)
	_, ok = none.LatencyBudgetFor(spec("x", 0, 0), "")
	require.False(t, ok)
}

func TestLatencyBudgetsRefuseBadEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ doc, want string }{
		{"latency_budgets: [{category: retrieval}]", "latency_budgets[0].soft: is required"},
		{"latency_budgets: [{soft: 0s}]", "latency_budgets[0].soft: must be a duration"},
		{"latency_budgets: [{soft: 2h}]", "latency_budgets[0].soft: must be a duration"},
		{"latency_budgets: [{soft: 1s, category: Retrieval}]", "must be retrieval, action or utility"},
		{"latency_budgets: [{soft: 1s, category: unspecified}]", "must be retrieval, action or utility"},
		{"latency_budgets: [{soft: 1s, mode: ''}]", "latency_budgets[0].mode: must not be empty"},
		{"latency_budgets: [{soft: 1s, tools: []}]", "latency_budgets[0].tools: must not be empty"},
		{"latency_budgets: [{soft: 1s, id: a}, {soft: 2s, id: a}]", `latency_budgets[1].id: "a" is already the id`},
		{"latency_budgets: [{soft: 1s, hard: 2s}]", "latency_budgets[0].hard: unknown field"},
	} {
		_, err := policy.Parse([]byte("tenant: {default: allow}\n" + tc.doc + "\n"))
		require.ErrorContains(t, err, tc.want, tc.doc)
	}
}

// The section is part of the document's version.
func TestLatencyBudgetsChangeTheVersion(t *testing.T) {
	t.Parallel()
	a := mustParse(t, "tenant: {default: allow}\nlatency_budgets: [{soft: 800ms}]\n")
	b := mustParse(t, "tenant: {default: allow}\nlatency_budgets: [{soft: 2s}]\n")
	c := mustParse(t, "tenant: {default: allow}\n")
	require.NotEqual(t, a.Version(), b.Version())
	require.NotEqual(t, a.Version(), c.Version())
}
