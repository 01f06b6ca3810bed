package dispatch_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// switchPolicy is a policy source whose policy a test changes.
type switchPolicy struct{ p atomic.Pointer[policy.Policy] }

func (s *switchPolicy) For(string) *policy.Policy { return s.p.Load() }

func (s *switchPolicy) set(t *testing.T, doc string) {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	s.p.Store(p)
}

const denyEtcWrites = askWrites + `    - id: no-etc
      effect: deny
      tools: [fs_write]
      args: {path: "/etc/**"}
      reason: etc is off limits
`

// Deny wins at every moment: a call parked under an ask rule that a deny
// rule applied later covers is not run when an approver approves it (the
// approver is told the rule, the caller gets PERMISSION_DENIED); and the
// sweep denies the parked calls the new policy denies without anyone
// approving, so they leave the inbox (issue 28, finding 2).
func TestApprovingACallThePolicyNowDeniesDoesNotRunIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// No sweep while the approver approves: a sweep in between would deny
	// the call first, and the approve path would go untried (found in CI).
	src := &switchPolicy{}
	src.set(t, askWrites)
	s := startApprovals(t, dispatch.Config{Policies: src, ApprovalSweep: time.Hour})

	approved := write(t, s.Dispatcher, "s1", "/etc/passwd")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, approved.State)
	src.set(t, denyEtcWrites)
	_, _, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: approved.CallId, Reason: "looks fine"})
	require.True(t, errors.Is(err, approvalflow.ErrPolicyDenies), "%v", err)
	require.Contains(t, err.Error(), "no-etc")
	r := waitResult(t, s.Stack, approved.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "etc is off limits")
	require.Zero(t, s.l.count(approved.CallId), "the call never ran")

	// Parked under the old policy, nobody approving: the sweep answers it.
	src = &switchPolicy{}
	src.set(t, askWrites)
	s = startApprovals(t, dispatch.Config{Policies: src, ApprovalSweep: 20 * time.Millisecond})
	parked := write(t, s.Dispatcher, "s1", "/etc/hosts")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, parked.State)
	stays := write(t, s.Dispatcher, "s1", "/tmp/fine")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, stays.State)
	src.set(t, denyEtcWrites)
	r = waitResult(t, s.Stack, parked.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "the policy changed while it waited for approval")
	a, err := s.Dispatcher.Approvals().GetApproval(ctx, approver, parked.CallId)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, a.State)
	pending, _, err := s.Dispatcher.Approvals().ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{
		State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING})
	require.NoError(t, err)
	require.Len(t, pending, 1, "the call the new policy still asks about stays in the inbox")
	require.Equal(t, stays.CallId, pending[0].Id)
	require.Zero(t, s.l.count(parked.CallId))
}
