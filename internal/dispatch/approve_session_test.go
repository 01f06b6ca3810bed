package dispatch_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// askWritesVoiceQuiet asks about writes, and forbids them in voice mode.
const askWritesVoiceQuiet = askWrites + `modes:
  voice:
    rules:
      - {id: voice-no-writes, effect: deny, tools: [fs_write], reason: nothing is written during a call}
`

// A call parked for approval does not run when it is approved after its
// session ended (SESSION_INACTIVE) or after the session's mode came to
// forbid it (MODE_RESTRICTED): the approver is told, the call is answered
// so, and a call in a session still live and allowed runs.
func TestApprovingACallWhoseSessionChangedDoesNotRunIt(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{Policies: mustPolicy(t, askWritesVoiceQuiet)})
	ctx := t.Context()

	ended := write(t, s.Dispatcher, "s-end", "/tmp/a")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, ended.State)
	s.EndSession(t, "s-end", "the caller hung up")
	_, _, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: ended.CallId, Reason: "fine"})
	require.True(t, errors.Is(err, approvalflow.ErrSessionInactive), "%v", err)
	r := waitResult(t, s.Stack, ended.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), "the caller hung up")
	require.Zero(t, s.l.count(ended.CallId), "the call never ran")
	a, err := s.Dispatcher.Approvals().GetApproval(ctx, approver, ended.CallId)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, a.State)

	moded := write(t, s.Dispatcher, "s-voice", "/tmp/b")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, moded.State)
	s.SetMode(t, "s-voice", "voice")
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: moded.CallId, Reason: "fine"})
	require.True(t, errors.Is(err, approvalflow.ErrPolicyDenies), "%v", err)
	require.Contains(t, err.Error(), "voice-no-writes")
	r = waitResult(t, s.Stack, moded.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType(), "%v", r.GetError())
	require.Contains(t, r.GetError().GetMessage(), `mode "voice"`)
	require.Zero(t, s.l.count(moded.CallId), "the call never ran")

	live := write(t, s.Dispatcher, "s-live", "/tmp/c")
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: live.CallId, Reason: "fine"})
	require.NoError(t, err)
	require.True(t, waitResult(t, s.Stack, live.CallId).GetOk())
	require.Equal(t, 1, s.l.count(live.CallId))
}

// A caller redeeming its approval token after its session ended is
// refused SESSION_INACTIVE (admission's session step comes before the
// token is looked at), once the dispatcher's session view has the end;
// the parked call never runs.
func TestRedeemingATokenInAnEndedSessionIsRefused(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{TokenKeys: testKeys(t, "k1")})
	confirmer := identity.Identity{Tenant: "default", Agent: "orchestrator", Scopes: []string{approvalflow.ConfirmScope}}
	const args = `{"path":"/srv"}`
	asked := callAs(t, s.Dispatcher, confirmer, args, "")
	token := requireParked(t, asked.Response, asked.CallId).GetToken()
	require.NotEmpty(t, token)
	s.EndSession(t, "s1", "the caller hung up")
	require.Eventually(t, func() bool { // the view learns of the end by its watch
		r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "fs_write", ArgumentsJson: `{}`, Session: "s1"}, 30*time.Second)
		require.NoError(t, err)
		return r.Response.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE
	}, 20*time.Second, 10*time.Millisecond)
	r := callAs(t, s.Dispatcher, confirmer, args, token)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.Response.GetError().GetType(), "%v", r)
	require.Zero(t, s.l.count(asked.CallId), "the parked call never ran")
}

// swapPolicy is a policy source whose policy a test replaces.
type swapPolicy struct{ p atomic.Pointer[policy.Policy] }

func (s *swapPolicy) For(string) *policy.Policy { return s.p.Load() }

// While a tenant's document cannot be loaded (the stand-in policy,
// which declares no mode), a parked or dead-lettered call in a session
// with a mode is not ended as MODE_RESTRICTED by the check that approvals,
// the approval sweep and retries run: a read that failed ends nothing.
func TestTheStandInPolicyEndsNoParkedCall(t *testing.T) {
	t.Parallel()
	inForce, err := policy.Parse([]byte(askWritesVoiceQuiet))
	require.NoError(t, err)
	src := &swapPolicy{}
	src.p.Store(inForce)
	s := startApprovals(t, dispatch.Config{Policies: src})
	s.SetMode(t, "s-voice", "voice")
	call := &toolwirev1.ToolCall{Tool: "wipe", Arguments: []byte(`{"path":"/x"}`),
		Caller: &toolwirev1.Caller{Tenant: identity.Default.Tenant, Agent: identity.Default.Agent, Session: "s-voice", Mode: "voice"}}
	ref, err := s.Dispatcher.CheckRetry(t.Context(), call)
	require.NoError(t, err)
	require.Nil(t, ref, "allowed in voice by the policy in force")
	src.p.Store(policystore.StandIn())
	ref, err = s.Dispatcher.CheckRetry(t.Context(), call)
	require.NoError(t, err)
	require.Nil(t, ref, "the stand-in ends nothing: %+v", ref)
}
