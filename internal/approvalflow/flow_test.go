package approvalflow_test

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// fakeCore records what the flow asks of the dispatcher.
type fakeCore struct {
	mu        sync.Mutex
	published []*toolwirev1.ToolCall
	events    map[string]*toolwirev1.CallEvent // by message id
	answers   []*toolwirev1.ToolResponse
	deny      string // what Denies says of every call; "" = no deny
	version   string
}

func (c *fakeCore) Denies(context.Context, *toolwirev1.ToolCall) (*approvalflow.Refusal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deny == "" {
		return nil, nil
	}
	return &approvalflow.Refusal{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, Why: c.deny}, nil
}

func (c *fakeCore) PolicyVersion(string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *fakeCore) PublishCall(_ context.Context, call *toolwirev1.ToolCall) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published = append(c.published, call)
	return nil
}

func (c *fakeCore) RecordEvent(_ context.Context, _, msgID string, ev *toolwirev1.CallEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events[msgID] = ev
	return nil
}

func (c *fakeCore) Answer(_ context.Context, _ *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers = append(c.answers, resp)
	return nil
}

func (c *fakeCore) publishedCalls() []*toolwirev1.ToolCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*toolwirev1.ToolCall(nil), c.published...)
}

func (c *fakeCore) event(msgID string) *toolwirev1.CallEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events[msgID]
}

// answer is the answer of call id, nil for none.
func (c *fakeCore) answer(id string) *toolwirev1.ToolResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.answers {
		if r.GetCallId() == id {
			return r
		}
	}
	return nil
}

type bundle struct {
	flow *approvalflow.Flow
	core *fakeCore
}

// setup starts a flow with cfg over a fresh JetStream; it is stopped when
// the test ends.
func setup(t *testing.T, cfg approvalflow.Config) *bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	core := &fakeCore{events: map[string]*toolwirev1.CallEvent{}}
	f, err := approvalflow.New(env.Bus, core, cfg)
	require.NoError(t, err)
	require.NoError(t, f.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, f.Stop(context.Background())) })
	return &bundle{flow: f, core: core}
}

var (
	approver = identity.Identity{Tenant: "acme", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}
	caller   = identity.Identity{Tenant: "acme", Agent: "bot"}
)

// park parks a call of "wipe" by who in session and returns it with its
// CONFIRMATION_REQUIRED answer.
func (b *bundle) park(t *testing.T, who identity.Identity, session string) (*toolwirev1.ToolCall, *toolwirev1.ToolError) {
	t.Helper()
	args := []byte(`{"path":"/tmp/x"}`)
	parsed, err := policy.ParseArgs(args)
	require.NoError(t, err)
	call := &toolwirev1.ToolCall{CallId: ulid.Make().String(), Tool: "wipe", SpecVersion: "v1", Arguments: args, Dispatcher: "d1",
		Caller: &toolwirev1.Caller{Tenant: who.Tenant, Agent: who.Agent, Session: session}}
	te, refusal := b.flow.Park(t.Context(), &approvalflow.Ask{Caller: who, Call: call, Spec: &toolwirev1.ToolSpec{Name: "wipe"},
		ArgsHash: parsed.Hash(), Reason: "wiping needs a person", Now: time.Now()})
	require.Nil(t, refusal)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, te.GetType())
	require.Equal(t, call.CallId, te.GetApproval().GetApprovalId(), "the approval id is the call id")
	require.Contains(t, te.GetMessage(), "wiping needs a person")
	return call, te
}

func (b *bundle) state(t *testing.T, id string) toolwirev1.ApprovalState {
	t.Helper()
	rec, err := b.flow.Record(t.Context(), "acme", id)
	require.NoError(t, err)
	return rec.Approval.GetState()
}

func TestApprovedCallIsPublishedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	call, te := b.park(t, caller, "")
	require.Empty(t, te.GetApproval().GetToken(), "no keys, no token")
	require.NotNil(t, b.core.event(call.CallId+"-awaiting_approval"))
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, b.state(t, call.CallId))

	a, g, err := b.flow.Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: call.CallId, Reason: " fine "})
	require.NoError(t, err)
	require.Nil(t, g, "approved once: no grant")
	require.Equal(t, "boss", a.GetApprover())
	require.Equal(t, "fine", a.GetReason())
	pub := b.core.publishedCalls()
	require.Len(t, pub, 1)
	require.Equal(t, call.CallId, pub[0].GetApprovalId())
	require.NotNil(t, b.core.event(call.CallId+"-approved"))
	rec, err := b.flow.Record(t.Context(), "acme", call.CallId)
	require.NoError(t, err)
	require.True(t, rec.Published)
	require.Equal(t, rec.Nonce, rec.Binding.Nonce)

	_, _, err = b.flow.Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: call.CallId})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	require.Len(t, b.core.publishedCalls(), 1)
}

func TestDenyAnswersPermissionDenied(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	call, _ := b.park(t, caller, "")
	_, err := b.flow.Deny(t.Context(), approver, call.CallId, "  ")
	require.ErrorIs(t, err, approvalflow.ErrBadApproval, "a denial needs a reason")
	_, err = b.flow.Deny(t.Context(), approver, call.CallId, strings.Repeat("x", 1025))
	require.ErrorIs(t, err, approvalflow.ErrBadApproval)

	a, err := b.flow.Deny(t.Context(), approver, call.CallId, "not today")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, a.GetState())
	resp := b.core.answer(call.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, resp.GetError().GetType())
	require.Contains(t, resp.GetError().GetMessage(), "not today")
	require.NotNil(t, b.core.event(call.CallId+"-approval_denied"))
	require.Empty(t, b.core.publishedCalls())

	_, err = b.flow.Deny(t.Context(), approver, call.CallId, "again")
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
}

func TestApprovalsNeedTheApproveScope(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	call, _ := b.park(t, caller, "")
	ctx := t.Context()
	_, _, err := b.flow.Approve(ctx, caller, &toolwirev1.ApproveRequest{Id: call.CallId})
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = b.flow.Deny(ctx, caller, call.CallId, "no")
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, _, err = b.flow.ListApprovals(ctx, caller, &toolwirev1.ListApprovalsRequest{})
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = b.flow.GetApproval(ctx, caller, call.CallId)
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = b.flow.ListGrants(ctx, caller, "", "")
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = b.flow.RevokeGrant(ctx, caller, ulid.Make().String())
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)

	stranger := identity.Identity{Tenant: "other", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}
	_, err = b.flow.GetApproval(ctx, stranger, call.CallId)
	require.ErrorIs(t, err, approvalflow.ErrUnknownApproval, "another tenant's approval does not exist for it")
	_, _, err = b.flow.Approve(ctx, stranger, &toolwirev1.ApproveRequest{Id: call.CallId})
	require.ErrorIs(t, err, approvalflow.ErrUnknownApproval)

	list, truncated, err := b.flow.ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{})
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, list, 1)
	require.Equal(t, call.CallId, list[0].GetId())
	_, _, err = b.flow.ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{Limit: -1})
	require.ErrorIs(t, err, approvalflow.ErrBadApproval)
}

func TestGrantsAreListedAndRevoked(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	ctx := t.Context()
	noSession, _ := b.park(t, caller, "")
	_, _, err := b.flow.Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: noSession.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION})
	require.ErrorIs(t, err, approvalflow.ErrBadApproval, "no session to grant")
	_, _, err = b.flow.Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: noSession.CallId, Tool: "wipe*"})
	require.ErrorIs(t, err, approvalflow.ErrBadApproval, "a tool glob shapes a grant")

	call, _ := b.park(t, caller, "s1")
	a, g, err := b.flow.Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: call.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION, ArgsPattern: map[string]string{"path": "/tmp/*"}})
	require.NoError(t, err)
	require.Equal(t, g.GetId(), a.GetGrantId())
	require.Equal(t, "s1", g.GetSession())
	require.Equal(t, "wipe", g.GetTool())
	require.NotNil(t, g.GetExpiresAt())

	gs, err := b.flow.ListGrants(ctx, approver, "", "s1")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Equal(t, g.GetId(), gs[0].GetId())
	require.Len(t, b.flow.Grants().Grants(call.Caller, "wipe"), 1, "the policy's decision sees it")

	ok, err := b.flow.RevokeGrant(ctx, approver, g.GetId())
	require.NoError(t, err)
	require.True(t, ok)
	gs, err = b.flow.ListGrants(ctx, approver, "", "")
	require.NoError(t, err)
	require.Empty(t, gs)
}

func TestTokenRedeemsTheParkedCallOnce(t *testing.T) {
	t.Parallel()
	keys, err := approvals.ParseKeys([]byte("k1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))))
	require.NoError(t, err)
	b := setup(t, approvalflow.Config{TokenKeys: keys})
	confirmer := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{approvalflow.ConfirmScope}}

	_, te := b.park(t, caller, "")
	require.Empty(t, te.GetApproval().GetToken(), "no confirm scope, no token")
	call, te := b.park(t, confirmer, "")
	token := te.GetApproval().GetToken()
	require.NotEmpty(t, token)
	require.Empty(t, b.core.event(call.CallId+"-awaiting_approval").GetError().GetApproval().GetToken(), "events never carry it")

	_, refused := b.flow.VerifyToken(caller, "wipe", token)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, refused.GetType(), "presenting one needs confirm")
	_, refused = b.flow.VerifyToken(confirmer, "wipe", token+"x")
	require.NotNil(t, refused, "an altered token")
	binding, refused := b.flow.VerifyToken(confirmer, "wipe", token)
	require.Nil(t, refused)
	require.Equal(t, call.CallId, binding.ID)

	parsed, err := policy.ParseArgs(call.Arguments)
	require.NoError(t, err)
	redeem := func() *toolwirev1.ToolError {
		again := &toolwirev1.ToolCall{CallId: binding.ID, Tool: "wipe", SpecVersion: "v1", Arguments: call.Arguments, Dispatcher: "d1",
			Caller: call.Caller}
		return b.flow.Redeem(t.Context(), &approvalflow.Redemption{Caller: confirmer, Token: binding, Call: again,
			ArgsHash: parsed.Hash(), Now: time.Now()})
	}
	require.Nil(t, redeem())
	require.Len(t, b.core.publishedCalls(), 1)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, b.state(t, call.CallId))
	refused = redeem()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, refused.GetType(), "a token is used once")
	require.Contains(t, refused.GetMessage(), "APPROVED already")
	require.Len(t, b.core.publishedCalls(), 1)
}

func TestWithoutKeysTokensAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	_, refused := b.flow.VerifyToken(identity.Default, "wipe", "anything")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, refused.GetType())
	require.Contains(t, refused.GetMessage(), "issues no approval tokens")
}

func TestSweepExpiresUnansweredApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{TTL: time.Second, Sweep: 10 * time.Millisecond})
	call, _ := b.park(t, caller, "")
	require.Eventually(t, func() bool { return b.core.answer(call.CallId) != nil }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, b.core.answer(call.CallId).GetError().GetType())
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_EXPIRED, b.state(t, call.CallId))
	require.NotNil(t, b.core.event(call.CallId+"-approval_expired"))
	_, _, err := b.flow.Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: call.CallId})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
}

func TestCancelEndsAParkedCall(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalflow.Config{})
	call, _ := b.park(t, caller, "")
	b.flow.CancelParked(t.Context(), caller, call.CallId, "changed my mind")
	resp := b.core.answer(call.CallId)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, resp.GetError().GetType())
	require.Contains(t, resp.GetError().GetMessage(), "cancelled by bot")
	_, _, err := b.flow.Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: call.CallId})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	require.Empty(t, b.core.publishedCalls())
}

func TestStopBeforeStartAndNoRestart(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	f, err := approvalflow.New(env.Bus, &fakeCore{}, approvalflow.Config{})
	require.NoError(t, err)
	require.NoError(t, f.Stop(t.Context()), "Stop before Start is harmless")
	require.ErrorIs(t, f.Start(t.Context()), startstop.ErrStopped, "a stopped flow does not start again")
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	c := approvalflow.Config{}.WithDefaults()
	require.Equal(t, 24*time.Hour, c.TTL)
	require.Equal(t, 24*time.Hour, c.GrantTTL)
	require.Equal(t, 2*time.Second, c.Sweep)
	require.Equal(t, 30*time.Second, c.FinishTimeout)
	require.NotNil(t, c.Logger)
	require.NoError(t, c.Validate())
	for field, bad := range map[string]approvalflow.Config{
		"TTL":           {TTL: time.Millisecond},
		"GrantTTL":      {GrantTTL: time.Millisecond},
		"Retention":     {Retention: -time.Second},
		"Sweep":         {Sweep: time.Millisecond},
		"FinishTimeout": {FinishTimeout: time.Millisecond},
	} {
		require.ErrorContains(t, bad.WithDefaults().Validate(), field+" ", field)
	}
}
