package worker_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Calls published straight onto NATS that name an approval (or a grant)
// which does not cover them are refused by the worker's re-check —
// CONFIRMATION_REQUIRED, dead-lettered — and never run: another call's
// approval, the approved call's id with other arguments, a pending
// approval, an approval that does not exist, a grant that does not
// exist. The approved call itself ran once (the ledger).
func TestWorkerRefusesCallsTheirApprovalDoesNotCover(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	runs := map[string]int{}
	wipe := tool.Must(tool.New("wipe", func(ctx context.Context, in pathArgs) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		mu.Lock()
		runs[info.CallID]++
		mu.Unlock()
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{wipe}})
	ctx := t.Context()
	approver := identity.Identity{Tenant: "default", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}
	park := func(path string) string {
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"` + path + `"}`})
		require.NoError(t, err)
		require.NotNil(t, sub.Awaiting)
		return sub.CallID
	}
	approved, pending := park("/tmp"), park("/var")
	_, _, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: approved})
	require.NoError(t, err)
	res := waitResult(t, s, "default", s.Dispatcher.Name(), approved)
	require.True(t, res.Ok, "%v", res.Error)

	raw := rawCalls{t, s}
	attacks := map[string]*toolwirev1.ToolCall{}
	add := func(what string, change func(c *toolwirev1.ToolCall)) {
		c := raw.call(ulid.Make().String(), "wipe", `{"path":"/tmp"}`)
		change(c)
		attacks[what] = c
	}
	add("another call's approval", func(c *toolwirev1.ToolCall) { c.ApprovalId = approved })
	add("other arguments", func(c *toolwirev1.ToolCall) {
		c.CallId, c.ApprovalId, c.Arguments, c.Dispatcher = approved, approved, []byte(`{"path":"/"}`), "attacker"
	})
	add("a pending approval", func(c *toolwirev1.ToolCall) { c.CallId, c.ApprovalId, c.Dispatcher = pending, pending, "attacker" })
	add("no such approval", func(c *toolwirev1.ToolCall) { c.ApprovalId = c.CallId })
	add("no such grant", func(c *toolwirev1.ToolCall) { c.GrantId = ulid.Make().String() })
	add("nothing at all", func(*toolwirev1.ToolCall) {})
	for _, c := range attacks {
		raw.publish(c)
	}
	dls := waitDLQ(t, s, uint64(len(attacks)))
	for _, dl := range dls {
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, dl.LastError.GetType(), dl.LastError.GetMessage())
		require.Contains(t, dl.LastError.GetMessage(), "approval check refused")
	}
	settled(t, s)
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(runs)
	}
	require.Equal(t, map[string]int{approved: 1}, count())
	require.Equal(t, int64(len(attacks)), s.Worker.Stats().ApprovalRefusals)

	// The pending call, approved after the attack, still runs once (its
	// result subject is its own dispatcher's, not the attacker's).
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: pending})
	require.NoError(t, err)
	require.True(t, waitResult(t, s, "default", s.Dispatcher.Name(), pending).Ok)
	require.Equal(t, map[string]int{approved: 1, pending: 1}, count())
}
