package dispatch_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// requireNothingQueued checks that the calls stream holds no call.
func requireNothingQueued(t *testing.T, s *dispatchtest.Stack) {
	t.Helper()
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "a refused call reached the calls stream")
}

// Duplicate keys inside arguments_json are refused with VALIDATION naming
// the key, at any depth (before, the last one won: {"path":"a",
// "path":"/etc/passwd"} ran with /etc/passwd); and a request carrying both
// arguments and arguments_json is refused (before, one silently won).
func TestArgumentsAreReadOneWayOnly(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	read := tool.Must(tool.New("read", func(_ context.Context, in json.RawMessage) (string, error) {
		runs.Add(1)
		return string(in), nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{read}})
	for doc, field := range map[string]string{
		`{"path":"a","path":"/etc/passwd"}`:               "/path",
		`{"opts":{"mode":"r","mode":"w"}}`:                "/opts/mode",
		`{"list":[{"k":1},{"k":1,"k":2}]}`:                "/list/1/k",
		`{"path":"a","\u0070ath":"b"}`:                    "/path",
		`{"a":{"b":{"c":[[{"secret":1,"secret":2}]]}}}`:   "/a/b/c/0/0/secret",
		`{"x":1,"y":{"x":1},"z":[{"x":1}],"x ":1,"y":[]}`: "/y",
	} {
		r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "read", ArgumentsJson: doc})
		require.False(t, r.Response.Ok, doc)
		e := r.Response.Error
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, e.Type, doc)
		require.Len(t, e.Violations, 1, doc)
		require.Equal(t, field, e.Violations[0].Field, doc)
		require.Contains(t, e.Message, "duplicate key", doc)
	}

	both := call(t, s.Client, &toolwirev1.CallRequest{Tool: "read", ArgumentsJson: `{"path":"a"}`,
		Arguments: args(t, map[string]any{"path": "/etc/passwd"})})
	require.False(t, both.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, both.Response.Error.Type)
	require.Contains(t, both.Response.Error.Message, "arguments_json")
	same := call(t, s.Client, &toolwirev1.CallRequest{Tool: "read", ArgumentsJson: `{"path":"a"}`,
		Arguments: args(t, map[string]any{"path": "a"})})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, same.Response.GetError().GetType(), "both forms, even equal")
	requireNothingQueued(t, s)
	require.Zero(t, runs.Load())

	// The same key in different objects is no duplicate.
	ok := call(t, s.Client, &toolwirev1.CallRequest{Tool: "read", ArgumentsJson: `{"k":1,"o":{"k":2},"l":[{"k":3},{"k":4}]}`})
	require.True(t, ok.Response.Ok, "%v", ok.Response.Error)
}

// A tenant that is not a valid tenant name is refused by the dispatcher
// core too (an Authenticator in Go could produce one), never mapped to a
// subject token.
func TestDispatcherRefusesTenantsThatAreNotTokens(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	for _, tenant := range []string{"a.b", "", "zoë", "a*", "a>b"} {
		id := identity.Identity{Tenant: tenant, Agent: "x", Scopes: []string{"*"}}
		_, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 0)
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
		_, err = s.Dispatcher.Submit(ctx, id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
		_, err = s.Dispatcher.GetResult(ctx, id, "01J00000000000000000000000", 0)
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
		_, err = s.Dispatcher.Cancel(ctx, id, "01J00000000000000000000000", "")
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
		err = s.Dispatcher.Watch(ctx, id, "01J00000000000000000000000", func(*toolwirev1.CallEvent) error { return nil })
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
		_, err = s.Dispatcher.GetSession(ctx, id, "s")
		require.ErrorIs(t, err, identity.ErrBadTenant, tenant)
	}
	requireNothingQueued(t, s)
	info, err := s.Env.Bus.Events.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing recorded under a mapped tenant")
}
