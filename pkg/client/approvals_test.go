package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval methods and the error of a parked call: Submit reports it
// in Submission.Approval; the error matches a CONFIRMATION_REQUIRED
// *ToolError; WithWaitForApproval waits for the denial; grants are listed
// and revoked; a decided approval is FailedPrecondition.
func TestApprovalMethods(t *testing.T) {
	t.Parallel()
	wipe := tool.Must(tool.New("wipe", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{wipe}})
	ctx := t.Context()

	sub, err := b.client.Submit(ctx, "wipe", map[string]string{"path": "/a"}, client.WithSession("s1"))
	require.NoError(t, err)
	require.Nil(t, sub.Result)
	require.NotNil(t, sub.Approval)
	require.Equal(t, sub.CallID, sub.Approval.ApprovalID)
	require.True(t, errors.Is(sub.Approval, &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED}))
	require.WithinDuration(t, time.Now().Add(24*time.Hour), sub.Approval.ExpiresAt, time.Minute)

	_, err = b.client.GetResult(ctx, sub.CallID, 0)
	var ask *client.ApprovalRequiredError
	require.ErrorAs(t, err, &ask)
	require.Equal(t, sub.CallID, ask.CallID)

	a, g, err := b.client.Approve(ctx, sub.CallID, client.ApproveFor(toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION),
		client.WithArgsPattern("path", "/a*"), client.WithGrantTTL(time.Hour), client.WithReason("ok"))
	require.NoError(t, err)
	require.Equal(t, "APPROVED", client.ApprovalStateName(a.GetState()))
	require.Equal(t, g.GetId(), a.GetGrantId())
	res, err := b.client.GetResult(ctx, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, "wiped /a", res.Text())
	_, _, err = b.client.Approve(ctx, sub.CallID)
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))

	// The grant covers the session's later calls under /a*.
	res, err = b.client.Call(ctx, "wipe", map[string]string{"path": "/ab"}, client.WithSession("s1"))
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Err())
	grants, err := b.client.ListGrants(ctx, "", "s1")
	require.NoError(t, err)
	require.Len(t, grants, 1)
	ok, err := b.client.RevokeGrant(ctx, g.GetId())
	require.NoError(t, err)
	require.True(t, ok)

	// Waiting for the approval: the denial ends the wait.
	denied := make(chan error, 1)
	go func() {
		res, err := b.client.Call(ctx, "wipe", map[string]string{"path": "/b"}, client.WithWaitForApproval(), client.WithWait(time.Minute))
		if err == nil {
			err = res.Err()
		}
		denied <- err
	}()
	var id string
	require.Eventually(t, func() bool {
		list, _, err := b.client.ListApprovals(ctx, client.ApprovalFilter{State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING})
		if err != nil || len(list) != 1 {
			return false
		}
		id = list[0].GetId()
		return true
	}, 10*time.Second, 10*time.Millisecond)
	got, err := b.client.GetApproval(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "wipe", got.GetTool())
	_, err = b.client.Deny(ctx, id, "no")
	require.NoError(t, err)
	select {
	case err = <-denied:
	case <-time.After(time.Minute):
		t.Fatal("the waiting Call was never answered")
	}
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, client.ErrorTypeOf(err))
	_, err = b.client.Deny(ctx, id, "again")
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
}
