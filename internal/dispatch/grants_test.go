package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const askWrites = `
tenant:
  default: allow
  rules:
    - id: ask-writes
      effect: ask
      tools: [fs_write]
      args: {path: "/**"}
      reason: writes need a person
`

func write(t *testing.T, d *dispatch.Dispatcher, session, path string) *toolwirev1.CallResponse {
	t.Helper()
	r, err := d.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "fs_write",
		ArgumentsJson: `{"path":"` + path + `"}`, Session: session}, 30*time.Second)
	require.NoError(t, err)
	return r
}

// Approving with a session scope stores a grant that covers the later
// calls of the session that match it (tool, argument glob), on every
// replica, until it is revoked; calls it does not cover still ask. The
// caller is told the rule's reason, never its text.
func TestGrantsCoverLaterCalls(t *testing.T) {
	t.Parallel()
	cfg := dispatch.Config{Policies: mustPolicy(t, askWrites)}
	s := startApprovals(t, cfg)
	other := s.StartDispatcher(t, cfg)
	ctx := t.Context()

	first := write(t, s.Dispatcher, "s1", "/tmp/a")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, first.State)
	msg := first.Response.Error.Message
	require.Contains(t, msg, "writes need a person")
	require.NotContains(t, msg, "/**", "the rule's text stays private")

	approvedAt := time.Now()
	a, g, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: first.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION, ArgsPattern: map[string]string{"path": "/tmp/**"},
		Ttl: durationpb.New(time.Hour), Reason: "tmp is fine"})
	require.NoError(t, err)
	t.Logf("FIGURE Approve took %s", time.Since(approvedAt).Round(time.Microsecond))
	returned := time.Now()
	require.NotNil(t, g)
	require.Equal(t, g.Id, a.GrantId)
	require.Equal(t, "session", g.Layer)
	require.Equal(t, "s1", g.Session)
	require.Equal(t, "fs_write", g.Tool, "the call's tool by default")

	// In force on the other replica as soon as its watch delivers it.
	require.Eventually(t, func() bool {
		gs, err := other.Approvals().ListGrants(ctx, approver, "", "s1")
		return err == nil && len(gs) == 1
	}, 10*time.Second, time.Millisecond)
	t.Logf("FIGURE a grant is in force on the other replica %s after Approve returned", time.Since(returned).Round(time.Microsecond))
	require.True(t, waitResult(t, s.Stack, first.CallId).Ok)
	covered, err := other.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "fs_write",
		ArgumentsJson: `{"path":"/tmp/b/c"}`, Session: "s1"})
	require.NoError(t, err)
	require.Nil(t, covered.Awaiting)
	require.True(t, waitResult(t, s.Stack, covered.CallID).Ok)
	for _, c := range []struct{ session, path string }{{"s1", "/etc/passwd"}, {"s2", "/tmp/x"}, {"s1", "/tmp/../etc/passwd"}} {
		r := write(t, other, c.session, c.path)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, r.State, "%+v", c)
	}
	// The grant is on the admission record, and the worker checked it.
	var granted *toolwirev1.PolicyDecision
	require.NoError(t, s.Dispatcher.Watch(ctx, identity.Default, covered.CallID, func(ev *toolwirev1.CallEvent) error {
		if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED {
			granted = ev.Policy
		}
		return nil
	}))
	require.NotNil(t, granted)
	require.Equal(t, g.Id, granted.GrantId)
	require.Equal(t, "ask-writes", granted.RuleId)

	ok, err := s.Dispatcher.Approvals().RevokeGrant(ctx, approver, g.Id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		gs, err := other.Approvals().ListGrants(ctx, approver, "", "")
		return err == nil && len(gs) == 0
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, write(t, other, "s1", "/tmp/d").State)
	require.Equal(t, 2, s.l.total())

	// A session grant needs a session; a bad glob is refused.
	noSession := write(t, s.Dispatcher, "", "/tmp/e")
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: noSession.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION})
	require.ErrorIs(t, err, approvalflow.ErrBadApproval)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: noSession.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_AGENT, Tool: "fs_["})
	require.ErrorIs(t, err, approvalflow.ErrBadApproval)
	// An agent grant with a tool glob then covers the agent's calls of
	// every session.
	_, g2, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: noSession.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_AGENT, Tool: "fs_*"})
	require.NoError(t, err)
	require.Equal(t, "local", g2.Agent)
	require.True(t, write(t, s.Dispatcher, "s9", "/etc/hosts").Response.GetOk())
}
