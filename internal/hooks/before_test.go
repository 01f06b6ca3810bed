package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/hooks"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/hook"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const beforeDoc = `tenant: {default: allow}
hooks:
  - {id: second, phase: before, tool: guard, tools: [echo], priority: 20}
  - {id: first, phase: before, tool: guard, tools: [echo], priority: 10, timeout: 3s}
`

var acme = identity.Identity{Tenant: "acme", Agent: "bot"}

// before runs the before-hooks of s on a call of echo with text, hook
// "first" answering first and the others continuing.
func before(t *testing.T, s *bundle, text string, first hook.BeforeAnswer) (hooks.Verdict, *toolwirev1.ToolCall) {
	t.Helper()
	s.core.answer = func(_ context.Context, req *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		var in hook.BeforeRequest
		require.NoError(t, json.Unmarshal([]byte(req.ArgumentsJson), &in))
		if in.Hook == "first" {
			return done(t, first), nil
		}
		return done(t, hook.BeforeAnswer{}), nil
	}
	call := echoCall(text)
	return s.hooks.Before(t.Context(), acme, &toolwirev1.ToolSpec{Name: "echo", Version: "v1"}, call), call
}

// Each hook is called in priority order through the core, as the
// fleet's own call of the tenant: agent "hook:<id>", every scope, the
// hook's timeout as its schedule-to-close and wait, marked as a hook call.
func TestBeforeHooksAreCallsInPriorityOrder(t *testing.T) {
	t.Parallel()
	s := setup(t, nil, beforeDoc)
	v, call := before(t, s, "hello", hook.BeforeAnswer{Action: hook.Continue})
	require.Equal(t, hooks.Verdict{}, v)
	require.JSONEq(t, `{"text":"hello"}`, string(call.Arguments))

	calls := s.core.take()
	require.Len(t, calls, 2)
	for i, id := range []string{"first", "second"} {
		c := calls[i]
		require.Equal(t, identity.Identity{Tenant: "acme", Agent: "hook:" + id, Scopes: []string{"*"}}, c.id)
		require.True(t, c.hookCall, "the hook's own call is marked")
		require.Equal(t, "guard", c.req.Tool)
		var in hook.BeforeRequest
		require.NoError(t, json.Unmarshal([]byte(c.req.ArgumentsJson), &in))
		require.Equal(t, hook.BeforeRequest{Hook: id, Tool: "echo", SpecVersion: "v1", Arguments: json.RawMessage(`{"text":"hello"}`),
			Caller: hook.Caller{Tenant: "acme", Agent: "bot", Session: "s1"}}, in)
	}
	require.Equal(t, 3*time.Second, calls[0].wait)
	require.Equal(t, 3*time.Second, calls[0].req.ScheduleToClose.AsDuration())
	require.Equal(t, 5*time.Second, calls[1].wait, "the default timeout")
}

// What a hook answers decides: allow stops the hooks, deny refuses, ask
// asks, rewrite replaces the arguments (checked again), and an unknown
// action refuses; each refusal and ask is recorded with rule hook:<id>.
func TestBeforeHookAnswers(t *testing.T) {
	t.Parallel()
	s := setup(t, nil, beforeDoc)

	v, _ := before(t, s, "hello", hook.BeforeAnswer{Action: hook.Allow})
	require.Equal(t, hooks.Verdict{}, v)
	require.Len(t, s.core.take(), 1, "allow: no later hook")

	v, _ = before(t, s, "hello", hook.BeforeAnswer{Action: hook.Deny, Reason: "not this text"})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, v.Refusal.GetType())
	require.Contains(t, v.Refusal.GetMessage(), `hook "first" denies this call of "echo": not this text`)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, v.Decision.GetOutcome())
	require.Equal(t, "hook:first", v.Decision.GetRuleId())
	require.Equal(t, "not this text", v.Decision.GetReason())
	require.Len(t, s.core.take(), 1, "deny: no later hook")

	v, call := before(t, s, "hello", hook.BeforeAnswer{Action: hook.Ask})
	require.Nil(t, v.Refusal)
	require.NotNil(t, v.Ask)
	require.Equal(t, "hook first", v.Ask.Reason, "the default reason")
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ASK, v.Decision.GetOutcome())
	require.Equal(t, "hook:first", call.PolicyRule, "the call is stamped with what asked")
	s.core.take()

	v, call = before(t, s, "hello", hook.BeforeAnswer{Action: hook.Rewrite, Arguments: json.RawMessage(`{"text":"rewritten"}`)})
	require.Equal(t, hooks.Verdict{}, v)
	require.JSONEq(t, `{"text":"rewritten"}`, string(call.Arguments))
	require.NotEmpty(t, call.CallerArgsSha256, "the caller's arguments stay bound")
	calls := s.core.take()
	require.Contains(t, calls[1].req.ArgumentsJson, "rewritten", "later hooks see the rewrite")

	v, call = before(t, s, "hello", hook.BeforeAnswer{Action: hook.Rewrite, Arguments: json.RawMessage(`{"text":5}`)})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, v.Refusal.GetType())
	require.Contains(t, v.Refusal.GetMessage(), `hook "first" rewrote the arguments into ones the tool refuses`)
	require.JSONEq(t, `{"text":"hello"}`, string(call.Arguments), "a refused rewrite changes nothing")
	s.core.take()

	v, _ = before(t, s, "hello", hook.BeforeAnswer{Action: hook.Rewrite})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, v.Refusal.GetType())
	require.Contains(t, v.Refusal.GetMessage(), "a rewrite without arguments")
	s.core.take()

	v, _ = before(t, s, "hello", hook.BeforeAnswer{Action: "shrug"})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, v.Refusal.GetType())
	require.Contains(t, v.Refusal.GetMessage(), `hook "first": unknown action "shrug"`)
	s.core.take()
}

// A hook that fails refuses the call TRANSIENT (failure: closed, the
// default); with failure: open the call goes on to the next hook. Not
// answering in time, failing, and answering what is not JSON are
// failures; an answer in the first text block is read.
func TestBeforeHookFailures(t *testing.T) {
	t.Parallel()
	spec := &toolwirev1.ToolSpec{Name: "echo", Version: "v1"}
	for name, answer := range map[string]func() (*toolwirev1.CallResponse, error){
		"error": func() (*toolwirev1.CallResponse, error) { return nil, errors.New("no core") },
		"too late": func() (*toolwirev1.CallResponse, error) {
			return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_PENDING}, nil
		},
		"failed": func() (*toolwirev1.CallResponse, error) {
			return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_DONE, Response: &toolwirev1.ToolResponse{
				Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "boom"}}}, nil
		},
		"not json": func() (*toolwirev1.CallResponse, error) {
			return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_DONE, Response: &toolwirev1.ToolResponse{Ok: true,
				Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: "yes"}}}}}}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, nil, beforeDoc)
			s.core.answer = func(context.Context, *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) { return answer() }
			v := s.hooks.Before(t.Context(), acme, spec, echoCall("hello"))
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, v.Refusal.GetType())
			require.True(t, v.Refusal.GetRetryable())
			require.Contains(t, v.Refusal.GetMessage(), `hook "first" could not look at this call`)

			open := setup(t, nil, beforeDoc+"  - {id: third, phase: before, tool: guard, tools: [echo], priority: 30, failure: open}\n")
			open.core.answer = func(context.Context, *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) { return answer() }
			open.hooks.Before(t.Context(), acme, spec, echoCall("hello"))
			require.Len(t, open.core.take(), 1, "closed: the first failure refuses")
		})
	}

	s := setup(t, nil, "tenant: {default: allow}\nhooks:\n  - {id: first, phase: before, tool: guard, tools: [echo], failure: open}\n  - {id: second, phase: before, tool: guard, tools: [echo]}\n")
	n := 0
	s.core.answer = func(context.Context, *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		if n++; n == 1 {
			return nil, errors.New("no core")
		}
		return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_DONE, Response: &toolwirev1.ToolResponse{Ok: true,
			Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: `{"action":"deny"}`}}}}}}, nil
	}
	v := s.hooks.Before(t.Context(), acme, spec, echoCall("hello"))
	require.Len(t, s.core.take(), 2, "open: the next hook looks")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, v.Refusal.GetType(), "an answer in the first text block")
}

// No hook runs on a hook's own call: neither before-hooks nor after-hooks.
func TestNoHooksOnHookCalls(t *testing.T) {
	t.Parallel()
	s := setup(t, nil, beforeDoc+"  - {id: after, phase: after, tool: guard, tools: [echo]}\n")
	var inner context.Context
	s.core.answer = func(ctx context.Context, _ *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		inner = ctx
		return done(t, hook.BeforeAnswer{Action: hook.Allow}), nil
	}
	require.False(t, hooks.IsHookCall(t.Context()))
	s.hooks.Before(t.Context(), acme, &toolwirev1.ToolSpec{Name: "echo", Version: "v1"}, echoCall("hello"))
	require.True(t, hooks.IsHookCall(inner))
	s.core.take()

	call := echoCall("hello")
	require.Equal(t, hooks.Verdict{}, s.hooks.Before(inner, acme, &toolwirev1.ToolSpec{Name: "echo"}, call))
	s.hooks.BindAfter(inner, "acme", call)
	require.Empty(t, call.AfterHooks)
	require.Empty(t, s.core.take(), "a hook's own call is not hooked")

	s.hooks.BindAfter(t.Context(), "acme", call)
	require.Len(t, call.AfterHooks, 1, "a caller's call is")
	require.Equal(t, "after", call.AfterHooks[0].GetId())
	require.Equal(t, "guard", call.AfterHooks[0].GetTool())
	require.Equal(t, 5*time.Second, call.AfterHooks[0].GetTimeout().AsDuration())
}
