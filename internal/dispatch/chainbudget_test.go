package dispatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A budget keyed by chain is shared by the calls of one delegation
// chain, whatever their depth: a sub-agent spends its parent's budget;
// another chain has its own; a call at the top of a chain counts under
// its own id. The limit is the example of docs/delegation.md ("Budgets
// per chain").
func TestBudgetCountsPerChain(t *testing.T) {
	t.Parallel()
	search := tool.Must(tool.New("search", func(context.Context, struct{}) (string, error) { return "found", nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{holdTool("hold"), search}, Concurrency: 8})
	s.ApplyPolicy(t, string(docsDelegationYAML(t)[1][1])) // two units per chain
	echo := func(parent string) *toolwirev1.ToolResponse {
		t.Helper()
		return callOnBehalf(t, s, "search", `{}`, parent)
	}
	a, b, sub := twoChains(t, s)
	require.True(t, echo(a.CallID).GetOk())
	require.True(t, echo(sub.CallID).GetOk(), "one level down, the same chain's second unit")
	refused := echo(sub.CallID)
	require.False(t, refused.GetOk())
	require.Contains(t, refused.GetError().GetMessage(), "one task's agents share two searches a day")
	refused = echo(a.CallID)
	require.False(t, refused.GetOk(), "the parent shares the chain's budget")
	require.True(t, echo(b.CallID).GetOk(), "another chain has its own")
	for range 3 {
		require.True(t, echo("").GetOk(), "a call at the top of its chain counts under its own id")
	}
}
