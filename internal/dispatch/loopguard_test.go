package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/tool"
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

// lookupInput has a noise argument (reason) and an optional one with no
// mark (page).
type lookupInput struct {
	Q      string `json:"q"`
	Page   int    `json:"page,omitempty"`
	Reason string `json:"reason,omitempty" toolwire:"noise"`
}

// The loop guard sees cycles of up to three calls (A, B, A, B, …; A, B, C,
// A, B, C, …) and ignores what the tool declares as noise: a reason that
// changes with every call does not reset the count, a page does.
func TestLoopGuardSeesCyclesAndNoise(t *testing.T) {
	t.Parallel()
	lookup := tool.Must(tool.New("lookup", func(_ context.Context, in lookupInput) (map[string]any, error) {
		return map[string]any{"q": in.Q}, nil
	}, tool.WithDescription("Looks a word up."), tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 4, Tools: append(builtin.Tools(), lookup)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(`tenant:
  default: allow
loop_guard:
  warn: 2
  ask: 0
  deny: 3
`), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Dispatcher.Config().Policies.(*policystore.Holder).Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	call := func(sess, tl, args string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(t.Context(), session("cycle"), &toolwirev1.CallRequest{Tool: tl, ArgumentsJson: args, Session: sess}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	// A, B, A, B, A, B: the (A, B) cycle warned at its 2nd round, denied at its 3rd.
	for i, c := range []struct{ tl, args string }{{"echo", `{"text":"a"}`}, {"lookup", `{"q":"a"}`}, {"echo", `{"text":"a"}`},
		{"lookup", `{"q":"a"}`}, {"echo", `{"text":"a"}`}, {"lookup", `{"q":"a"}`}} {
		r := call("s-cycle", c.tl, c.args)
		switch {
		case i < 3:
			require.True(t, r.Ok, "%d: %v", i, r.GetError())
			require.Zero(t, r.GetMeta().GetLoopCount(), i)
		case i < 5:
			require.True(t, r.Ok, "%d: %v", i, r.GetError())
			require.EqualValues(t, 2, r.GetMeta().GetLoopCount(), "warned at %d", i)
		default:
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "denied at %d", i)
			require.Contains(t, r.GetError().GetMessage(), "cycle of 2 calls")
		}
	}
	// A, B, C, A, B, C, A, B, C: the (A, B, C) cycle warned at its 2nd
	// round, denied at its 3rd.
	for i, c := range []struct{ tl, args string }{{"echo", `{"text":"a"}`}, {"lookup", `{"q":"a"}`}, {"echo", `{"text":"c"}`},
		{"echo", `{"text":"a"}`}, {"lookup", `{"q":"a"}`}, {"echo", `{"text":"c"}`},
		{"echo", `{"text":"a"}`}, {"lookup", `{"q":"a"}`}, {"echo", `{"text":"c"}`}} {
		r := call("s-cycle3", c.tl, c.args)
		switch {
		case i < 5:
			require.True(t, r.Ok, "%d: %v", i, r.GetError())
			require.Zero(t, r.GetMeta().GetLoopCount(), i)
		case i < 8:
			require.True(t, r.Ok, "%d: %v", i, r.GetError())
			require.EqualValues(t, 2, r.GetMeta().GetLoopCount(), "warned at %d", i)
		default:
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "denied at %d", i)
			require.Contains(t, r.GetError().GetMessage(), "cycle of 3 calls")
		}
	}
	// Noise does not make another call; a page does.
	for i, reason := range []string{"first", "retrying", "once more"} {
		r := call("s-noise", "lookup", `{"q":"x","reason":"`+reason+`"}`)
		if i < 2 {
			require.True(t, r.Ok, "%d: %v", i, r.GetError())
			continue
		}
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "a changed reason is the same call")
	}
	for i := range 3 {
		r := call("s-pages", "lookup", fmt.Sprintf(`{"q":"x","page":%d}`, i+1))
		require.True(t, r.Ok, "page %d is another call: %v", i+1, r.GetError())
	}
}
