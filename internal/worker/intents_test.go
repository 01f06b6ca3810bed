package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A tool that returns an undeclared or malformed intent is answered
// INTERNAL, the violation counted; declared, valid intents pass.
func TestWorkerRefusesInvalidIntents(t *testing.T) {
	t.Parallel()
	emit := func(typ, payload string) func(ctx context.Context, _ empty) (*tool.Result, error) {
		return func(ctx context.Context, _ empty) (*tool.Result, error) {
			return &tool.Result{Intents: []*toolwirev1.Intent{{Id: "i1", Type: typ, PayloadJson: payload}}}, nil
		}
	}
	decl := tool.WithIntents(intents.SetState, "acme.reindex")
	tools := []*tool.Tool{
		tool.Must(tool.New("good", emit(intents.SetState, `{"key":"k","value":1}`), decl)),
		tool.Must(tool.New("undeclared", emit(intents.EndSession, ``), decl)),
		tool.Must(tool.New("malformed", emit(intents.SetState, `{"value":1}`), decl)),
	}
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, tools...)

	require.True(t, callTool(t, s, "good").Ok)
	for name, want := range map[string]string{"undeclared": "not declared", "malformed": "payload invalid"} {
		r := callTool(t, s, name)
		require.False(t, r.Ok, name)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Error.Type, name)
		require.Contains(t, r.Error.Message, "invalid intents", name)
		require.Contains(t, r.Error.Message, want, name)
		require.Empty(t, r.Intents, name)
	}
	require.Equal(t, int64(2), w.Stats().IntentViolations)
}

// A spec declaring an intent type that is neither built-in nor namespaced
// stops the worker at start-up.
func TestWorkerRefusesUnknownIntentTypes(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	bad := tool.Must(tool.New("bad", func(context.Context, empty) (string, error) { return "", nil }, tool.WithIntents("reindex")))
	b := s.Env.Open(t, "w")
	w, err := worker.New(b, worker.Config{Pools: []worker.Pool{{PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: nativeExecs(t, bad), Specs: []*toolwirev1.ToolSpec{bad.Spec()}})
	require.NoError(t, err)
	err = w.Start(t.Context())
	require.Error(t, err)
	require.Contains(t, err.Error(), `"reindex"`)
}

// Intents reach the session through Call's apply_intents and through
// ApplyIntents, each once however often the call's intents are applied.
func TestApplyIntentsEndToEnd(t *testing.T) {
	t.Parallel()
	bump := tool.Must(tool.New("bump", func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		if err := tool.EmitIntent(ctx, intents.SetState, map[string]any{"key": in.Key, "value": true}); err != nil {
			return "", err
		}
		return "ok", tool.EmitIntent(ctx, intents.Notify, map[string]any{"message": "set " + in.Key})
	}, tool.WithIntents(intents.SetState, intents.Notify)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{bump}})
	id := identity.Default
	ctx := t.Context()

	r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"a"}`, Session: "sess-1", ApplyIntents: true}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.Equal(t, "sess-1", r.Response.Meta.Session)
	require.Equal(t, "true", r.Session.StateJson["a"])
	require.Len(t, r.Session.Log, 2)

	// Applying the same call again (a retried RPC, a second orchestrator)
	// changes nothing.
	ar, err := s.Dispatcher.ApplyIntents(ctx, id, r.CallId)
	require.NoError(t, err)
	require.Equal(t, int32(0), ar.Applied)
	require.Equal(t, int32(2), ar.Skipped)
	require.Len(t, ar.Session.Log, 2)

	// A call without apply_intents is applied later, once.
	r2, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"b"}`, Session: "sess-1"}, 30*time.Second)
	require.NoError(t, err)
	require.Nil(t, r2.Session)
	for want := range []int32{2, 0} {
		ar, err = s.Dispatcher.ApplyIntents(ctx, id, r2.CallId)
		require.NoError(t, err)
		require.Equal(t, []int32{2, 0}[want], ar.Applied)
	}
	sess, err := s.Dispatcher.GetSession(ctx, id, "sess-1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "true", "b": "true"}, sess.StateJson)
	require.Len(t, sess.Log, 4)

	// An idempotent repeat naming another session applies to the first
	// call's session, once, never to the other.
	first, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"k"}`, Session: "sess-A",
		IdempotencyKey: "once", ApplyIntents: true}, 30*time.Second)
	require.NoError(t, err)
	require.Empty(t, first.ApplyError)
	again, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"k"}`, Session: "sess-B",
		IdempotencyKey: "once", ApplyIntents: true}, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, first.CallId, again.CallId)
	require.Equal(t, "sess-A", again.Session.GetSession())
	b, err := s.Dispatcher.GetSession(ctx, id, "sess-B")
	require.NoError(t, err)
	require.Zero(t, b.Revision)

	// Other tenants see nothing; calls without a session cannot apply.
	other, err := s.Dispatcher.GetSession(ctx, identity.Identity{Tenant: "other"}, "sess-1")
	require.NoError(t, err)
	require.Empty(t, other.StateJson)
	// (A recent id of another tenant reads as possibly pending, an old one
	// as unknown: either way nothing is applied.)
	_, err = s.Dispatcher.ApplyIntents(ctx, identity.Identity{Tenant: "other"}, r2.CallId)
	require.Error(t, err)
	require.True(t, errors.Is(err, dispatch.ErrUnknownCall) || errors.Is(err, dispatch.ErrNotFinished), "%v", err)
	_, err = s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"c"}`, ApplyIntents: true}, 30*time.Second)
	require.ErrorIs(t, err, dispatch.ErrNoSession)
	r3, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "bump", ArgumentsJson: `{"key":"c"}`}, 30*time.Second)
	require.NoError(t, err)
	_, err = s.Dispatcher.ApplyIntents(ctx, id, r3.CallId)
	require.ErrorIs(t, err, dispatch.ErrNoSession)
}

func nativeExecs(t *testing.T, tools ...*tool.Tool) map[toolwirev1.ExecutorType]executors.Executor {
	t.Helper()
	nat, err := native.New(tools...)
	require.NoError(t, err)
	return map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat}
}
