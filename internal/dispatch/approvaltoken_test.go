package dispatch_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func testKeys(t *testing.T, ids ...string) *approvals.Keys {
	t.Helper()
	text := ""
	for _, id := range ids {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		text += id + ":" + base64.StdEncoding.EncodeToString(k) + "\n"
	}
	keys, err := approvals.ParseKeys([]byte(text))
	require.NoError(t, err)
	return keys
}

// callAs calls tool with args as id through d and returns the answer.
func callAs(t *testing.T, d *dispatch.Dispatcher, id identity.Identity, args, token string) *toolwirev1.CallResponse {
	t.Helper()
	r, err := d.Call(t.Context(), id, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: args, Session: "s1", ApprovalToken: token}, 30*time.Second)
	require.NoError(t, err)
	return r
}

func requireTokenRefused(t *testing.T, r *toolwirev1.CallResponse, why string) {
	t.Helper()
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, why)
	e := r.Response.GetError()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, e.GetType(), why)
	require.Contains(t, e.GetMessage(), "approval token", why)
	require.Nil(t, e.GetApproval(), "%s: refused, not parked", why)
	require.False(t, e.GetRetryable())
}

// The token form and the attacks on it: a caller with the confirm scope
// gets a signed token and runs the call by sending it back; no token, a
// forged one (altered MAC, another installation's key), one for other
// arguments (one byte), for another tool version, an expired one, one
// used twice, a token without keys or without the scope — each is
// refused and nothing more runs. The same arguments with their keys
// reordered and spaced differently are the same call (canonical JSON).
func TestApprovalTokenAttacks(t *testing.T) {
	t.Parallel()
	keys := testKeys(t, "k1")
	s := startApprovals(t, dispatch.Config{TokenKeys: keys})
	d := s.Dispatcher
	confirmer := identity.Identity{Tenant: "default", Agent: "orchestrator", Scopes: []string{approvalflow.ConfirmScope}}
	plain := identity.Identity{Tenant: "default", Agent: "orchestrator", Scopes: []string{"tools"}}
	const args = `{"path":"/srv","key":"k-secret-1"}`

	asked := callAs(t, d, confirmer, args, "")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, asked.State)
	req := requireParked(t, asked.Response, asked.CallId)
	token := req.GetToken()
	require.NotEmpty(t, token)
	noScope := callAs(t, d, plain, args, "")
	require.Empty(t, requireParked(t, noScope.Response, noScope.CallId).GetToken(), "no confirm scope: no token")
	// The token is in no record: not on the event GetResult reads.
	g, err := d.GetResult(t.Context(), confirmer, asked.CallId, 0)
	require.NoError(t, err)
	require.Empty(t, g.Response.GetError().GetApproval().GetToken())

	bind, err := keys.Verify(token)
	require.NoError(t, err)
	resign := func(change func(a *policy.Approval)) string {
		a := *bind
		change(&a)
		s, err := keys.Sign(&a)
		require.NoError(t, err)
		return s
	}
	other := testKeys(t, "k1")
	forged, err := other.Sign(bind)
	require.NoError(t, err)
	altered := []byte(token)
	altered[len(altered)-2] ^= 0x01
	for why, tok := range map[string]string{
		"altered MAC":           string(altered),
		"another key":           forged,
		"garbage":               "tw1.k1.e30.AAAA",
		"another tool version":  resign(func(a *policy.Approval) { a.SpecVersion = "sha256:0000" }),
		"expired":               resign(func(a *policy.Approval) { a.Expires = time.Now().Add(-time.Second) }),
		"another session":       resign(func(a *policy.Approval) { a.Session = "s2" }),
		"another approval":      resign(func(a *policy.Approval) { a.ID = noScope.CallId }),
		"another nonce":         resign(func(a *policy.Approval) { a.Nonce = approvals.NewNonce() }),
		"no approval behind it": resign(func(a *policy.Approval) { a.ID = "01J00000000000000000000C77" }),
	} {
		requireTokenRefused(t, callAs(t, d, confirmer, args, tok), why)
	}
	requireTokenRefused(t, callAs(t, d, confirmer, `{"path":"/srw","key":"k-secret-1"}`, token), "one byte of the arguments")
	requireTokenRefused(t, callAs(t, d, plain, args, token), "without the confirm scope")
	requireNothingQueued(t, s.Stack)
	require.Zero(t, s.l.total())

	// The same arguments, keys reordered and spaced: the call runs, as the
	// parked call (its id), once.
	ran := callAs(t, d, confirmer, " {\n \"key\" : \"k-secret-1\",\t\"path\":\"/srv\" } ", token)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, ran.State)
	require.True(t, ran.Response.Ok, "%v", ran.Response.Error)
	require.Equal(t, asked.CallId, ran.CallId)
	require.Equal(t, 1, s.l.count(asked.CallId))
	a, err := d.Approvals().GetApproval(t.Context(), approver, asked.CallId)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, a.State)
	require.Equal(t, "orchestrator", a.Approver)

	// Used twice: refused, nothing more runs; an approver comes too late.
	requireTokenRefused(t, callAs(t, d, confirmer, args, token), "used twice")
	_, _, err = d.Approvals().Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: asked.CallId})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	require.Equal(t, 1, s.l.total())

	// An installation without keys refuses every token.
	bare := startApprovals(t, dispatch.Config{})
	requireTokenRefused(t, callAs(t, bare.Dispatcher, identity.Default, args, token), "no keys")
	require.Zero(t, bare.l.total())
}

// Two dispatchers racing one token: exactly one execution (the ledger);
// every other presentation is refused.
func TestRacingTokensRunOnce(t *testing.T) {
	t.Parallel()
	keys := testKeys(t, "k1", "k0")
	s := startApprovals(t, dispatch.Config{TokenKeys: keys})
	replicas := []*dispatch.Dispatcher{s.Dispatcher, s.StartDispatcher(t, dispatch.Config{TokenKeys: keys})}
	const args = `{"path":"/race"}`
	asked := callAs(t, s.Dispatcher, identity.Default, args, "")
	token := requireParked(t, asked.Response, asked.CallId).GetToken()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := replicas[i%2].Call(context.WithoutCancel(t.Context()), identity.Default,
				&toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: args, Session: "s1", ApprovalToken: token}, 30*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case r.Response.GetOk():
				ok++
			case r.Response.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED:
				refused++
			default:
				t.Errorf("unexpected answer %v", r.Response)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, ok)
	require.Equal(t, 7, refused)
	require.Equal(t, 1, s.l.count(asked.CallId))
	require.Equal(t, 1, s.l.total())
}

// A call whose approval token was redeemed on another replica than the
// one that parked it is the redeeming replica's: its ACCEPTED record,
// its workers' events and a cancel request all land on that replica's
// events subject, where its workers read a cancel back before a tool
// that is not safe to rerun starts (before, the cancel request went to
// the parking replica's subject, where no worker of the call looked).
func TestARedeemedCallsRecordsAreTheRedeemingReplicas(t *testing.T) {
	t.Parallel()
	keys := testKeys(t, "k1", "k0")
	s := startApprovals(t, dispatch.Config{TokenKeys: keys})
	other := s.StartDispatcher(t, dispatch.Config{TokenKeys: keys})
	const args = `{"path":"/redeemed"}`
	asked := callAs(t, s.Dispatcher, identity.Default, args, "")
	token := requireParked(t, asked.Response, asked.CallId).GetToken()
	ran := callAs(t, other, identity.Default, args, token)
	require.True(t, ran.Response.GetOk(), "%v", ran.Response.GetError())
	require.True(t, dispatch.RecordCancelRequest(t.Context(), s.Dispatcher, identity.Default, asked.CallId, "wipe", "late"))

	on := eventDispatchers(t, s.Stack, asked.CallId, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL)
	started := on[toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED][0]
	require.NotEqual(t, on[toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL][0], started, "parked and run on different replicas")
	require.Equal(t, started, on[toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED][0])
	require.Equal(t, started, on[toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED][0], "the cancel request is where the workers read it back")

	// The audit shows the parking replica's AWAITING_APPROVAL too.
	src, err := audit.Open(t.Context(), s.Env.Bus.NC, s.Env.Bus.Config.Prefix)
	require.NoError(t, err)
	var rec *audit.Record
	_, err = src.Run(t.Context(), audit.Filter{CallID: asked.CallId}, audit.Options{Events: true}, func(x *audit.Record) error { rec = x; return nil })
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Contains(t, auditedEvents(t, rec), "CALL_EVENT_TYPE_AWAITING_APPROVAL")
	require.Contains(t, auditedEvents(t, rec), "CALL_EVENT_TYPE_STARTED")
}
