package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The loop guard escalates a run of the same call in one session, counted
// across replicas: the 3rd and 4th run with meta.loop_count, the 5th to
// 9th are parked for an approver, the 10th is denied. Key order, number
// forms and white space do not make another call.
func TestLoopGuardEscalates(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, "tenant:\n  default: allow\n")
	forms := []string{`{"key":"k","value":{"n":1,"m":2}}`, `{"value":{"m":2.0,"n":1},"key":"k"}`,
		"{ \"key\" : \"k\" ,\n \"value\" : { \"n\" : 1e0 , \"m\": 20e-1 } }"}
	call := func(i int, args string) *toolwirev1.CallResponse {
		r, err := replicas[i%2].Call(t.Context(), session("loop"), &toolwirev1.CallRequest{Tool: "remember", ArgumentsJson: args,
			Session: "s-loop"}, 30*time.Second)
		require.NoError(t, err)
		return r
	}
	for i := 1; i <= 10; i++ {
		r := call(i, forms[i%len(forms)])
		switch {
		case i < 3:
			require.True(t, r.Response.Ok, "%d: %v", i, r.Response.GetError())
			require.Zero(t, r.Response.GetMeta().GetLoopCount(), i)
		case i < 5:
			require.True(t, r.Response.Ok, "%d: %v", i, r.Response.GetError())
			require.EqualValues(t, i, r.Response.GetMeta().GetLoopCount(), "warned at %d", i)
		case i < 10:
			require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, r.State, "asked at %d", i)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, r.Response.GetError().GetType())
			require.Contains(t, r.Response.GetError().GetMessage(), "loop guard")
		default:
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType(), "denied at %d", i)
			require.Contains(t, r.Response.GetError().GetMessage(), "10 times in a row")
			require.Contains(t, r.Response.GetError().GetSuggestion(), "stop repeating")
		}
	}
	// Another call starts a new run.
	require.True(t, call(0, `{"key":"k","value":"something else"}`).Response.Ok)
	r := call(1, forms[0])
	require.True(t, r.Response.Ok)
	require.Zero(t, r.Response.GetMeta().GetLoopCount())
}

// Thresholds and exemptions come from the document; a call without a
// session is not guarded.
func TestLoopGuardFromTheDocument(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `tenant:
  default: allow
loop_guard:
  warn: 0
  ask: 0
  deny: 2
  exempt: [sleep]
`)
	call := func(tool, args, sess string) *toolwirev1.ToolResponse {
		r, err := replicas[0].Call(t.Context(), session("doc"), &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args, Session: sess}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	require.True(t, call("echo", `{"text":"x"}`, "s").Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, call("echo", `{"text":"x"}`, "s").GetError().GetType())
	for range 3 {
		require.True(t, call("sleep", `{"duration":"1ms"}`, "s").Ok, "exempt")
		require.True(t, call("echo", `{"text":"x"}`, "").Ok, "no session, no guard")
	}
	_ = identity.Default
}
