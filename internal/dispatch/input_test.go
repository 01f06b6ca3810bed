package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// askTool asks once for a confirmation (its state "asked"), then acts,
// counting its acts; n pads the question.
func askTool(acts *atomic.Int64) *tool.Tool {
	return tool.Must(tool.New("ask", func(ctx context.Context, in struct {
		Msg string `json:"msg"`
		N   int    `json:"n,omitempty"`
	}) (*tool.Result, error) {
		if a := tool.InputFrom(ctx); a != nil && string(a.State) == "asked" {
			acts.Add(1)
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text("acted")}}, nil
		}
		return tool.NeedInput(map[string]tool.InputRequest{
			"ok": tool.Elicit("Confirm "+in.Msg+strings.Repeat("x", in.N)+"?", map[string]any{"type": "object"}),
		}, []byte("asked")), nil
	}))
}

// inputHook is an after-hook that counts the input requests it is shown
// and tries to redact those that mention a secret.
func inputHook(seen *atomic.Int64) *tool.Tool {
	return tool.Must(tool.New("inputhook", func(_ context.Context, in hook.AfterRequest) (hook.AfterAnswer, error) {
		seen.Add(int64(len(in.Response.InputRequests)))
		for _, r := range in.Response.InputRequests {
			if strings.Contains(string(r.Params), "secret") {
				return hook.AfterAnswer{Action: "redact", Content: json.RawMessage(`[{"type":"text","text":"no"}]`)}, nil
			}
		}
		return hook.AfterAnswer{Action: "continue"}, nil
	}))
}

func inputStack(t *testing.T, doc string, acts, seen *atomic.Int64) *dispatchtest.Stack {
	t.Helper()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), askTool(acts), inputHook(seen))})
	if doc != "" {
		a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(doc), policystore.ApplyOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	}
	return s
}

func callNow(t *testing.T, d *dispatch.Dispatcher, id identity.Identity, cr *toolwirev1.CallRequest) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := d.Call(t.Context(), id, cr, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	return r.Response
}

var accept = map[string]string{"ok": `{"action":"accept","content":{}}`}

// What an answering call may and may not do: answers without the round
// they answer come without the tool's state; an idempotency key binds the answers too; the same arguments
// in another spelling are the same arguments; answering the same round
// again and again is a loop the guard sees.
func TestAnsweringCalls(t *testing.T) {
	t.Parallel()
	var acts, seen atomic.Int64
	s := inputStack(t, "tenant: {default: allow}\nloop_guard:\n  warn: 0\n  ask: 0\n  deny: 3\n", &acts, &seen)
	d, me := s.Dispatcher, identity.Identity{Tenant: "default", Agent: "bot", Scopes: []string{"*"}}

	r := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"a"}`, InputResponsesJson: accept})
	require.True(t, r.Ok, "%v", r.Error)
	require.NotNil(t, r.InputRequired, "answers without the round they answer come without the tool's state: it asks")
	require.Zero(t, acts.Load())

	first := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"a"}`, IdempotencyKey: "k1"})
	require.NotNil(t, first.InputRequired)
	r = callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"a"}`, IdempotencyKey: "k1",
		Continues: first.CallId, InputResponsesJson: accept})
	require.False(t, r.Ok, "the key of the asking call, with answers")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, r.Error.Type)

	r = callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: "{ \"msg\" : \"a\" }",
		Continues: first.CallId, InputResponsesJson: accept})
	require.True(t, r.Ok, "another spelling of the same arguments: %v", r.Error)
	require.Equal(t, "acted", r.Content[0].GetText().GetText())

	// In a session, answering one round over and over is a loop.
	asked := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"b"}`, Session: "s1"})
	denied := false
	for range 3 {
		r := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"b"}`, Session: "s1",
			Continues: asked.CallId, InputResponsesJson: accept})
		denied = denied || (!r.Ok && r.Error.Type == toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED)
	}
	require.True(t, denied, "the third answer to one round is denied by the loop guard")
	// Asking and answering is no loop: the answer is not a repeat of the
	// call that asked (with the round left out, this session would be
	// denied at its third call).
	for range 3 {
		asked := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"c"}`, Session: "s2"})
		require.NotNil(t, asked.InputRequired, "%v", asked.Error)
		r := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"c"}`, Session: "s2",
			Continues: asked.CallId, InputResponsesJson: accept})
		require.True(t, r.Ok, "%v", r.Error)
	}
}

// After-hooks are shown what a tool asks for; one that would redact or
// replace a request for input fails (closed: the response is withheld),
// so what a hook must not let through never reaches the caller.
func TestAfterHooksSeeRequestsForInput(t *testing.T) {
	t.Parallel()
	var acts, seen atomic.Int64
	s := inputStack(t, "tenant: {default: allow}\nhooks:\n  - {id: look, phase: after, tool: inputhook, tools: [ask], timeout: 5s}\n", &acts, &seen)
	d, me := s.Dispatcher, identity.Default
	r := callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"plain"}`})
	require.True(t, r.Ok, "%v", r.Error)
	require.NotNil(t, r.InputRequired)
	require.EqualValues(t, 1, seen.Load())
	r = callNow(t, d, me, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"my secret"}`})
	require.False(t, r.Ok)
	require.Nil(t, r.InputRequired)
	require.Empty(t, r.Content)
	require.Contains(t, r.Error.Message, "withheld")
}

// A request for input over the worker's inline limit is not cut: the call
// fails, and nothing half-asked reaches the caller.
func TestLargeRequestForInputIsRefused(t *testing.T) {
	t.Parallel()
	var acts, seen atomic.Int64
	s := inputStack(t, "", &acts, &seen)
	r := callNow(t, s.Dispatcher, identity.Default, &toolwirev1.CallRequest{Tool: "ask", ArgumentsJson: `{"msg":"big","n":200000}`})
	require.False(t, r.Ok)
	require.Nil(t, r.InputRequired)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Error.Type)
	require.Contains(t, r.Error.Message, "over")
}
