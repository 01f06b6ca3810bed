package api_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// EndSession (admin scope) ends a session of the caller's tenant: the
// next call naming it is refused SESSION_INACTIVE, the same session id in
// another tenant runs, ending it again answers its state unchanged, and
// the end is in the session's log.
func TestEndSessionRPC(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	echo := func(key, session string) *toolwirev1.CallResponse {
		t.Helper()
		r, err := s.Client.Call(ctx, as(key, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: session}))
		require.NoError(t, err)
		return r.Msg
	}
	require.True(t, echo("acme-bot", "s-1").GetResponse().GetOk(), "the session runs before it ends")

	_, err := s.Client.EndSession(ctx, as("acme-bot", &toolwirev1.EndSessionRequest{Session: "s-1"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	_, err = s.Client.EndSession(ctx, as("acme-admin", &toolwirev1.EndSessionRequest{}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	_, err = s.Client.EndSession(ctx, as("acme-admin", &toolwirev1.EndSessionRequest{Session: "s-1", Reason: strings.Repeat("x", dispatch.MaxEndReasonBytes+1)}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)

	ended, err := s.Client.EndSession(ctx, as("acme-admin", &toolwirev1.EndSessionRequest{Session: "s-1", Reason: "the user hung up"}))
	require.NoError(t, err)
	sess := ended.Msg.GetSession()
	require.True(t, sess.GetEnded())
	require.Equal(t, "the user hung up", sess.GetEndReason())
	require.NotEmpty(t, sess.GetLog())
	last := sess.GetLog()[len(sess.GetLog())-1]
	require.Equal(t, "END_SESSION", last.GetType())
	require.JSONEq(t, `{"reason":"the user hung up"}`, last.GetPayloadJson())

	r := echo("acme-bot", "s-1")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.GetResponse().GetError().GetType())
	require.Contains(t, r.GetResponse().GetError().GetMessage(), "the user hung up")
	require.True(t, echo("beta-bot", "s-1").GetResponse().GetOk(), "beta's session s-1 is another session")

	again, err := s.Client.EndSession(ctx, as("acme-admin", &toolwirev1.EndSessionRequest{Session: "s-1", Reason: "again"}))
	require.NoError(t, err)
	require.Equal(t, "the user hung up", again.Msg.GetSession().GetEndReason())
	require.Equal(t, sess.GetRevision(), again.Msg.GetSession().GetRevision(), "ending an ended session changes nothing")
}

// ListSessions lists the caller's tenant's sessions only, paged and
// filtered by state, without their logs.
func TestListSessionsRPC(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys, NoWorker: true})
	ctx := t.Context()
	for _, id := range []string{"s-a", "s-b", "s-c"} {
		_, err := s.Client.SetSessionMode(ctx, as("acme-admin", &toolwirev1.SetSessionModeRequest{Session: id}))
		require.NoError(t, err)
	}
	_, err := s.Client.EndSession(ctx, as("acme-admin", &toolwirev1.EndSessionRequest{Session: "s-b", Reason: "done"}))
	require.NoError(t, err)
	_, err = s.Client.EndSession(ctx, as("beta-admin", &toolwirev1.EndSessionRequest{Session: "s-beta"}))
	require.NoError(t, err)

	list := func(key string, req *toolwirev1.ListSessionsRequest) ([]string, string) {
		t.Helper()
		resp, err := s.Client.ListSessions(ctx, as(key, req))
		require.NoError(t, err)
		var ids []string
		for _, sess := range resp.Msg.GetSessions() {
			require.Empty(t, sess.GetLog())
			ids = append(ids, sess.GetSession())
		}
		return ids, resp.Msg.GetNextPageToken()
	}
	ids, next := list("acme-bot", &toolwirev1.ListSessionsRequest{})
	require.Equal(t, []string{"s-a", "s-c", "s-b"}, ids, "update order; any key of the tenant under visibility tenant")
	require.Empty(t, next)
	ids, _ = list("beta-bot", &toolwirev1.ListSessionsRequest{})
	require.Equal(t, []string{"s-beta"}, ids)
	ids, _ = list("acme-bot", &toolwirev1.ListSessionsRequest{State: toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ENDED})
	require.Equal(t, []string{"s-b"}, ids)
	ids, _ = list("acme-bot", &toolwirev1.ListSessionsRequest{State: toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ACTIVE})
	require.Equal(t, []string{"s-a", "s-c"}, ids)

	ids, next = list("acme-bot", &toolwirev1.ListSessionsRequest{PageSize: 2})
	require.Equal(t, []string{"s-a", "s-c"}, ids)
	require.NotEmpty(t, next)
	ids, next = list("acme-bot", &toolwirev1.ListSessionsRequest{PageSize: 2, PageToken: next})
	require.Equal(t, []string{"s-b"}, ids)
	require.Empty(t, next)

	_, err = s.Client.ListSessions(ctx, as("acme-bot", &toolwirev1.ListSessionsRequest{PageToken: "nonsense"}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
}

// Under agent visibility "own" a session, which no one agent owns, is
// listed to keys with the admin or approve scope only.
func TestListSessionsVisibilityOwn(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys, NoWorker: true,
		Dispatcher: dispatch.Config{AgentVisibility: identity.VisibilityOwn}})
	_, err := s.Client.EndSession(t.Context(), as("acme-admin", &toolwirev1.EndSessionRequest{Session: "s-1"}))
	require.NoError(t, err)
	_, err = s.Client.ListSessions(t.Context(), as("acme-bot", &toolwirev1.ListSessionsRequest{}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	resp, err := s.Client.ListSessions(t.Context(), as("acme-admin", &toolwirev1.ListSessionsRequest{}))
	require.NoError(t, err)
	require.Len(t, resp.Msg.GetSessions(), 1)
}
