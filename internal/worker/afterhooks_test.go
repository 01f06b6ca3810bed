package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func hookNotes(r *toolwirev1.ToolResponse) []string {
	var out []string
	for _, n := range r.GetMeta().GetHooks() {
		out = append(out, n.Hook+":"+n.Action)
	}
	return out
}

// A call that names after-hooks the policy in force does not bind (a
// call published around admission, or by a worker asking for hook calls
// it has no business making) gets none run: the dispatcher runs only the
// hooks the tenant's policy binds to the tool, and notes the others.
func TestAfterHooksRunOnlyAsThePolicyBindsThem(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	raw := rawCalls{t, s}
	call := raw.call("01J00000000000000000000H01", "echo", `{"text":"hi"}`)
	call.AfterHooks = []*toolwirev1.AfterHookBinding{{Id: "ghost", Tool: "fail", Timeout: durationpb.New(time.Second)}}
	raw.publish(call)
	r := waitResult(t, s, "default", "d1", call.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, "hi", r.Content[0].GetText().GetText())
	require.Equal(t, []string{"ghost:unbound"}, hookNotes(r))
}

// With no dispatcher to run them, a call's after-hooks fail: its result
// is withheld unless every hook fails open, and the worker's wait is
// bounded by the hooks' timeouts.
func TestAfterHooksWithoutADispatcher(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	require.NoError(t, s.Dispatcher.Stop(t.Context()))
	raw := rawCalls{t, s}
	closed := raw.call("01J00000000000000000000H02", "echo", `{"text":"hi"}`)
	closed.AfterHooks = []*toolwirev1.AfterHookBinding{
		{Id: "lenient", Tool: "scan", Timeout: durationpb.New(time.Millisecond), FailOpen: true},
		{Id: "strict", Tool: "scan", Timeout: durationpb.New(time.Millisecond)},
	}
	open := raw.call("01J00000000000000000000H03", "echo", `{"text":"hi"}`)
	open.AfterHooks = closed.AfterHooks[:1]
	raw.publish(closed)
	raw.publish(open)

	r := waitResult(t, s, "default", "d1", closed.CallId)
	require.False(t, r.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Error.Type)
	require.Contains(t, r.Error.Message, "it is withheld (failure: closed)")
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Error.PartialSideEffects, "echo is read-only")
	require.Empty(t, r.Content)
	require.Equal(t, []string{"lenient:failed", "strict:failed"}, hookNotes(r))

	r = waitResult(t, s, "default", "d1", open.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, "hi", r.Content[0].GetText().GetText())
	require.Equal(t, []string{"lenient:failed"}, hookNotes(r))
}
