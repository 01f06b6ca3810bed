package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const afterDoc = `tenant: {default: allow}
hooks:
  - {id: tag, phase: after, tool: scrub, tools: [echo], priority: 20}
  - {id: scrub, phase: after, tool: scrub, tools: [echo], priority: 10, timeout: 3s}
`

// afterSetup returns running hooks bound by doc on a real JetStream,
// whose after-hooks answer by what answer makes of their request.
func afterSetup(t *testing.T, doc string, answer func(in hook.AfterRequest) hook.AfterAnswer) (*bundle, *bus.Bus) {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	s := setup(t, env.Bus, doc)
	s.core.answer = func(_ context.Context, req *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		var in hook.AfterRequest
		require.NoError(t, json.Unmarshal([]byte(req.ArgumentsJson), &in))
		return done(t, answer(in)), nil
	}
	require.NoError(t, s.hooks.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.hooks.Stop(context.Background())) })
	return s, env.Bus
}

// runAfter asks the after-hook service, as a worker does, to run the
// after-hooks of call on resp.
func runAfter(t *testing.T, b *bus.Bus, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) *toolwirev1.AfterHookReply {
	t.Helper()
	data, err := proto.Marshal(&toolwirev1.AfterHookRequest{Call: call, Response: resp})
	require.NoError(t, err)
	return request(t, b, data)
}

func request(t *testing.T, b *bus.Bus, data []byte) *toolwirev1.AfterHookReply {
	t.Helper()
	m, err := b.NC.Request(bus.AfterHookSubject(b.Config), data, 10*time.Second)
	require.NoError(t, err)
	var reply toolwirev1.AfterHookReply
	require.NoError(t, proto.Unmarshal(m.Data, &reply))
	return &reply
}

// boundCall is a call of echo with the after-hooks the policy binds.
func boundCall(s *bundle, text string) *toolwirev1.ToolCall {
	call := echoCall(text)
	s.hooks.BindAfter(context.Background(), "acme", call)
	return call
}

// textResponse is an ok response of text, with a structured copy.
func textResponse(text string) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{Ok: true, Content: []*toolwirev1.Content{tool.Text(text)},
		StructuredJson: fmt.Sprintf(`{"text":%q}`, text)}
}

func notes(reply *toolwirev1.AfterHookReply) []string {
	var out []string
	for _, n := range reply.GetNotes() {
		out = append(out, n.Hook+":"+n.Action)
	}
	return out
}

// firstText is the text of a hook response's first block.
func firstText(t *testing.T, r hook.Response) string {
	t.Helper()
	var blocks []struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(r.Content, &blocks))
	if len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

// The after-hooks the call names look at its response in order, each as
// the hooks before it left it; a redaction drops what it does not give
// back; the answer says what changed and what each hook did.
func TestAfterHooksLookInOrder(t *testing.T) {
	t.Parallel()
	var seen []string
	s, b := afterSetup(t, afterDoc, func(in hook.AfterRequest) hook.AfterAnswer {
		text := firstText(t, in.Response)
		seen = append(seen, in.Hook+":"+text)
		if in.Hook == "tag" {
			return hook.AfterAnswer{Action: hook.Annotate, Annotations: map[string]string{"scanned": "yes"}}
		}
		if strings.Contains(text, "secret") {
			return hook.AfterAnswer{Action: hook.Redact, Reason: "a secret", Content: json.RawMessage(`[{"type":"text","text":"[redacted]"}]`)}
		}
		return hook.AfterAnswer{}
	})

	reply := runAfter(t, b, boundCall(s, "hello"), textResponse("hello"))
	require.False(t, reply.Changed)
	require.Equal(t, []string{"scrub:continue", "tag:annotate"}, notes(reply))
	require.Equal(t, map[string]string{"scanned": "yes"}, reply.Notes[1].Annotations)
	require.Equal(t, []string{"scrub:hello", "tag:hello"}, seen)

	seen = nil
	reply = runAfter(t, b, boundCall(s, "my secret"), textResponse("my secret"))
	require.True(t, reply.Changed)
	require.True(t, reply.Redacted)
	require.Equal(t, "[redacted]", reply.Content[0].GetText().GetText())
	require.Empty(t, reply.StructuredJson, "what the redactor does not give back does not pass")
	require.Equal(t, "a secret", reply.Notes[0].Reason)
	require.Equal(t, []string{"scrub:my secret", "tag:[redacted]"}, seen, "the later hook sees the redaction")
	for _, c := range s.core.take() {
		require.True(t, c.hookCall)
		require.Contains(t, []string{"hook:scrub", "hook:tag"}, c.id.Agent)
		require.Equal(t, "acme", c.id.Tenant, "the call's tenant")
	}
}

// What an after-hook answers is taken whole or not at all: an answer it
// cannot take is the hook's failure (failure: open here, so the response
// goes on as it was), and a reason is cut to 1 KiB on a character
// boundary.
func TestAfterHookAnswers(t *testing.T) {
	t.Parallel()
	doc := "tenant: {default: allow}\nhooks:\n  - {id: scrub, phase: after, tool: scrub, tools: [echo], failure: open}\n"
	var ans hook.AfterAnswer
	s, b := afterSetup(t, doc, func(hook.AfterRequest) hook.AfterAnswer { return ans })
	manyAnnotations := map[string]string{}
	for i := range 17 {
		manyAnnotations[fmt.Sprint(i)] = "x"
	}
	for _, c := range []struct {
		name       string
		ans        hook.AfterAnswer
		action     string
		text       string // the first block's text; "" = unchanged
		structured string
	}{
		{name: "replace keeps what it leaves out", ans: hook.AfterAnswer{Action: hook.Replace, Content: json.RawMessage(`[{"type":"text","text":"new"}]`)},
			action: "replace", text: "new", structured: `{"text":"hello"}`},
		{name: "redact drops what it leaves out", ans: hook.AfterAnswer{Action: hook.Redact, StructuredContent: json.RawMessage(`{"text":"x"}`)},
			action: "redact", structured: `{"text":"x"}`},
		{name: "null drops the structured output", ans: hook.AfterAnswer{Action: hook.Replace, StructuredContent: json.RawMessage(`null`)},
			action: "replace", text: "hello"},
		{name: "content that is no MCP block", ans: hook.AfterAnswer{Action: hook.Redact, Content: json.RawMessage(`[{"type":"nonsense"}]`)},
			action: "failed", text: "hello", structured: `{"text":"hello"}`},
		{name: "structured output that is no object", ans: hook.AfterAnswer{Action: hook.Replace, StructuredContent: json.RawMessage(`[1]`)},
			action: "failed", text: "hello", structured: `{"text":"hello"}`},
		{name: "an unknown action", ans: hook.AfterAnswer{Action: "shrug"}, action: "failed", text: "hello", structured: `{"text":"hello"}`},
		{name: "too many annotations", ans: hook.AfterAnswer{Action: hook.Annotate, Annotations: manyAnnotations},
			action: "failed", text: "hello", structured: `{"text":"hello"}`},
		{name: "an empty annotation key", ans: hook.AfterAnswer{Action: hook.Annotate, Annotations: map[string]string{"": "x"}},
			action: "failed", text: "hello", structured: `{"text":"hello"}`},
	} {
		ans = c.ans
		reply := runAfter(t, b, boundCall(s, "hello"), textResponse("hello"))
		require.Nil(t, reply.Withheld, c.name)
		require.Equal(t, []string{"scrub:" + c.action}, notes(reply), c.name)
		if !reply.Changed {
			require.Equal(t, "hello", c.text, "%s: unchanged", c.name)
			require.Equal(t, `{"text":"hello"}`, c.structured, "%s: unchanged", c.name)
			continue
		}
		if c.text == "" {
			require.Empty(t, reply.Content, c.name)
		} else {
			require.Equal(t, c.text, reply.Content[0].GetText().GetText(), c.name)
		}
		require.Equal(t, c.structured, reply.StructuredJson, c.name)
	}

	ans = hook.AfterAnswer{Action: hook.Withhold, Reason: strings.Repeat("é", 4000)}
	reply := runAfter(t, b, boundCall(s, "hello"), textResponse("hello"))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, reply.Withheld.GetType())
	require.Equal(t, strings.Repeat("é", 512), reply.Notes[0].Reason, "cut to 1 KiB on a character boundary")
}

// A response that asks its caller for input is shown with what it asks,
// and can be passed, annotated or withheld, not redacted or replaced.
func TestAfterHooksOnRequestsForInput(t *testing.T) {
	t.Parallel()
	var got hook.Response
	s, b := afterSetup(t, afterDoc, func(in hook.AfterRequest) hook.AfterAnswer {
		got = in.Response
		return hook.AfterAnswer{Action: hook.Redact}
	})
	resp := &toolwirev1.ToolResponse{Ok: true, InputRequired: &toolwirev1.InputRequired{Requests: map[string]*toolwirev1.InputRequest{
		"ok": {Method: "elicitation/create", ParamsJson: `{"message":"sure?"}`}}}}
	reply := runAfter(t, b, boundCall(s, "hello"), resp)
	require.Equal(t, map[string]hook.InputRequest{"ok": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"sure?"}`)}}, got.InputRequests)
	require.JSONEq(t, `[]`, string(got.Content))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, reply.Withheld.GetType(), "failure: closed")
	require.Contains(t, reply.Withheld.GetMessage(), "redact of a request for input")
}

// A failed hook withholds the result (failure: closed); a failed call
// stays failed and is shown with its error; a hook the policy no longer
// binds is noted, not called; each hook looks once.
func TestAfterHookFailuresAndBindings(t *testing.T) {
	t.Parallel()
	s, b := afterSetup(t, afterDoc, func(in hook.AfterRequest) hook.AfterAnswer {
		if in.Response.Error != nil {
			return hook.AfterAnswer{Action: hook.Annotate, Annotations: map[string]string{"error": in.Response.Error.Type}}
		}
		return hook.AfterAnswer{}
	})
	failed := &toolwirev1.ToolResponse{Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, Message: "no"}}
	reply := runAfter(t, b, boundCall(s, "hello"), failed)
	require.Equal(t, "ERROR_TYPE_VALIDATION", reply.Notes[0].Annotations["error"])

	call := boundCall(s, "hello")
	call.AfterHooks = append(call.AfterHooks, call.AfterHooks[0], &toolwirev1.AfterHookBinding{Id: "ghost", Tool: "fail"})
	reply = runAfter(t, b, call, textResponse("hello"))
	require.Equal(t, []string{"scrub:continue", "tag:continue", "ghost:unbound"}, notes(reply))
	s.core.take()

	s.core.answer = func(context.Context, *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		return &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_PENDING}, nil
	}
	reply = runAfter(t, b, boundCall(s, "hello"), textResponse("hello"))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, reply.Withheld.GetType())
	require.Contains(t, reply.Withheld.GetMessage(), `after-hook "scrub" could not look at the result (no answer within 3s)`)
	require.Equal(t, []string{"scrub:failed"}, notes(reply), "no later hook")

	s.core.answer = func(context.Context, *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		return nil, fmt.Errorf("call: %w", errCoreStopped)
	}
	reply = runAfter(t, b, boundCall(s, "hello"), textResponse("hello"))
	require.Equal(t, "the dispatcher is stopping", reply.RetryReason, "a stopped core is not the hook's failure")
	require.Nil(t, reply.Withheld)
}

// A request the service cannot serve is answered: one it cannot decode,
// or naming no valid tenant or too many hooks, withholds the result; one
// whose spec cannot be read is asked again.
func TestAfterHookRequestsRefused(t *testing.T) {
	t.Parallel()
	s, b := afterSetup(t, afterDoc, func(hook.AfterRequest) hook.AfterAnswer { return hook.AfterAnswer{} })
	reply := request(t, b, []byte("not protobuf"))
	require.Contains(t, reply.Withheld.GetMessage(), "undecodable after-hook request")

	call := boundCall(s, "hello")
	call.Caller.Tenant = "a.b"
	require.Contains(t, runAfter(t, b, call, textResponse("hello")).Withheld.GetMessage(), "the call names no valid tenant")

	call = boundCall(s, "hello")
	for range 65 {
		call.AfterHooks = append(call.AfterHooks, call.AfterHooks[0])
	}
	require.Contains(t, runAfter(t, b, call, textResponse("hello")).Withheld.GetMessage(), "names 67 after-hooks (at most 64)")

	call = boundCall(s, "hello")
	call.Tool = "gone"
	require.Contains(t, runAfter(t, b, call, textResponse("hello")).RetryReason, "the tool's spec could not be read")
	require.Empty(t, s.core.take(), "no hook was called")
}

// The service follows the one lifecycle contract: Stop before Start is
// harmless, a stopped service does not start again, and Stop cancels the
// hook calls under way (their requests are answered "retry") and waits
// for them.
func TestAfterHookServiceLifecycle(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	s := setup(t, env.Bus, afterDoc)
	require.NoError(t, s.hooks.Stop(t.Context()))
	require.ErrorIs(t, s.hooks.Start(t.Context()), startstop.ErrStopped)
	_, err := env.Bus.NC.Request(bus.AfterHookSubject(env.Bus.Config), nil, 5*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders, "not serving")

	s = setup(t, env.Bus, afterDoc)
	entered := make(chan struct{})
	s.core.answer = func(ctx context.Context, _ *toolwirev1.CallRequest) (*toolwirev1.CallResponse, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	require.NoError(t, s.hooks.Start(t.Context()))
	require.NoError(t, s.hooks.Start(t.Context()), "Start is idempotent")
	data, err := proto.Marshal(&toolwirev1.AfterHookRequest{Call: boundCall(s, "hello"), Response: textResponse("hello")})
	require.NoError(t, err)
	replies := make(chan *nats.Msg, 1)
	go func() {
		m, _ := env.Bus.NC.Request(bus.AfterHookSubject(env.Bus.Config), data, 10*time.Second)
		replies <- m
	}()
	<-entered
	require.NoError(t, s.hooks.Stop(t.Context()))
	m := <-replies
	require.NotNil(t, m, "the request is answered")
	var reply toolwirev1.AfterHookReply
	require.NoError(t, proto.Unmarshal(m.Data, &reply))
	require.Equal(t, "the dispatcher is stopping", reply.RetryReason)
	require.NoError(t, s.hooks.Stop(t.Context()), "Stop is idempotent")
	_, err = env.Bus.NC.Request(bus.AfterHookSubject(env.Bus.Config), nil, 5*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders, "stopped")
}
