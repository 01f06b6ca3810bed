package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetDelegation shows a call's ancestors up to the root and its children
// (at most MaxDelegationChildrenShown, the rest counted), only the calls
// the caller may see: never another tenant's, and under per-agent
// visibility not another agent's (issue 31).
func TestGetDelegationShowsTheChainTheCallerMaySee(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{AgentVisibility: identity.VisibilityOwn, MaxQueueWait: time.Minute})
	d := s.Dispatcher
	bot := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"tools"}}
	ops := identity.Identity{Tenant: "acme", Agent: "ops", Scopes: []string{"admin"}}
	globex := identity.Identity{Tenant: "globex", Agent: "bot", Scopes: []string{"*"}}

	root := submitChild(t, d, bot, "hold", "")
	require.Nil(t, root.Rejected)
	t.Cleanup(func() { _, _ = d.Cancel(t.Context(), bot, root.CallID, "") })
	opsChild := echoChild(t, d, ops, root.CallID) // the oldest child: another agent's
	require.Nil(t, opsChild.Rejected, "%v", opsChild.Rejected.GetError())
	mid := submitChild(t, d, bot, "hold", root.CallID)
	require.Nil(t, mid.Rejected, "%v", mid.Rejected.GetError())
	for range dispatch.MaxDelegationChildrenShown + 1 {
		c := echoChild(t, d, bot, root.CallID)
		require.Nil(t, c.Rejected, "%v", c.Rejected.GetError())
	}
	leaf := echoChild(t, d, bot, mid.CallID)
	require.Nil(t, leaf.Rejected, "%v", leaf.Rejected.GetError())
	r, err := d.GetResult(t.Context(), bot, leaf.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)

	dg, err := d.GetDelegation(t.Context(), bot, leaf.CallID)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, dg.State)
	require.Len(t, dg.Ancestors, 2, "parent, then root")
	require.Equal(t, mid.CallID, dg.Ancestors[0].CallId)
	require.Equal(t, "hold", dg.Ancestors[0].Tool)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_PENDING, dg.Ancestors[0].State)
	require.Equal(t, root.CallID, dg.Ancestors[1].CallId)
	require.Empty(t, dg.Children)

	dg, err = d.GetDelegation(t.Context(), bot, root.CallID)
	require.NoError(t, err)
	require.Empty(t, dg.Ancestors)
	require.Len(t, dg.Children, dispatch.MaxDelegationChildrenShown)
	require.Equal(t, mid.CallID, dg.Children[0].CallId, "oldest first; ops's child is not bot's to see")
	require.EqualValues(t, 2, dg.MoreChildren, "bot's 22 children: 20 shown, 2 more")
	for _, c := range dg.Children {
		require.NotEqual(t, opsChild.CallID, c.CallId)
	}

	dg, err = d.GetDelegation(t.Context(), ops, root.CallID)
	require.NoError(t, err)
	require.Equal(t, opsChild.CallID, dg.Children[0].CallId, "an admin sees every agent's calls")
	require.EqualValues(t, 3, dg.MoreChildren)

	dg, err = d.GetDelegation(t.Context(), bot, opsChild.CallID)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_UNKNOWN, dg.State, "another agent's call")
	require.Empty(t, dg.Ancestors)
	for _, id := range []string{root.CallID, leaf.CallID} {
		dg, err = d.GetDelegation(t.Context(), globex, id)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_UNKNOWN, dg.State, "another tenant's call")
		require.Empty(t, dg.Ancestors)
		require.Empty(t, dg.Children)
	}
}

// echoChild submits an echo call on behalf of parent through d.
func echoChild(t *testing.T, d *dispatch.Dispatcher, id identity.Identity, parent string) *dispatch.Submitted {
	t.Helper()
	s, err := d.Submit(t.Context(), id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, ParentCallId: parent})
	require.NoError(t, err)
	return s
}
