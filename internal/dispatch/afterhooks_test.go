package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// scrubTool is an after-hook: it answers by the text of the response it
// looks at.
func scrubTool(log *hookLog) *tool.Tool {
	return tool.Must(tool.New("scrub", func(ctx context.Context, in hook.AfterRequest) (hook.AfterAnswer, error) {
		var blocks []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(in.Response.Content, &blocks)
		text := ""
		if len(blocks) > 0 {
			text = blocks[0].Text
		}
		log.add(in.Hook + ":" + in.Tool + ":" + text)
		if in.Hook == "tag" {
			return hook.AfterAnswer{Action: "annotate", Annotations: map[string]string{"scanned": "yes"}}, nil
		}
		switch {
		case strings.Contains(text, "secret"):
			return hook.AfterAnswer{Action: "redact", Reason: "a secret",
				Content: json.RawMessage(`[{"type":"text","text":"[redacted]"}]`)}, nil
		case text == "withhold-me":
			return hook.AfterAnswer{Action: "withhold", Reason: "not for your eyes"}, nil
		case text == "bad-redact":
			return hook.AfterAnswer{Action: "redact", Content: json.RawMessage(`[{"type":"nonsense"}]`)}, nil
		case text == "long-reason":
			return hook.AfterAnswer{Action: "withhold", Reason: strings.Repeat("é", 4000)}, nil
		case text == "bad-content":
			return hook.AfterAnswer{Action: "replace", Content: json.RawMessage(`[{"type":"nonsense"}]`)}, nil
		case text == "slow":
			select {
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
				return hook.AfterAnswer{}, ctx.Err()
			}
		case in.Tool == "fail":
			// Tries to make a success of a failure: only the content changes.
			return hook.AfterAnswer{Action: "replace", Content: json.RawMessage(`[{"type":"text","text":"all fine"}]`)}, nil
		}
		return hook.AfterAnswer{Action: "continue"}, nil
	}))
}

const afterHooksDoc = `tenant: {default: allow}
hooks:
  - {id: tag, phase: after, tool: scrub, tools: [echo], priority: 20}
  - {id: scrub, phase: after, tool: scrub, tools: [echo, fail], priority: 10, timeout: 3s}
`

func afterHooksStack(t *testing.T, doc string) (*dispatchtest.Stack, *hookLog) {
	t.Helper()
	log := &hookLog{}
	rows := tool.Must(tool.New("rows", func(_ context.Context, in struct {
		N int `json:"n"`
	}) (map[string][]int, error) {
		return map[string][]int{"rows": make([]int, in.N)}, nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), scrubTool(log), rows), Concurrency: 8})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(doc), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	return s, log
}

// storedResult reads the result the call's worker stored.
func storedResult(t *testing.T, s *dispatchtest.Stack, callID string) *toolwirev1.ToolResponse {
	t.Helper()
	b := s.Env.Bus
	// Any dispatcher's: Result makes a token of "*".
	filter := strings.Replace(b.Subjects.Result("default", "D", callID), ".D.", ".*.", 1)
	m, err := bus.LastMsg(t.Context(), b.Results, filter)
	require.NoError(t, err)
	var resp toolwirev1.ToolResponse
	require.NoError(t, proto.Unmarshal(m.Data, &resp))
	return &resp
}

func hookActions(resp *toolwirev1.ToolResponse) []string {
	var out []string
	for _, n := range resp.GetMeta().GetHooks() {
		out = append(out, n.Hook+":"+n.Action)
	}
	return out
}

// After-hooks look at the response in priority order before it is stored:
// a redaction is what the caller and the audit get, later hooks see it, a
// withhold refuses the result, a failed call stays failed, and hooks never
// run on a hook's own call.
func TestAfterHooks(t *testing.T) {
	t.Parallel()
	s, log := afterHooksStack(t, afterHooksDoc)

	r := echoCall(t, s, "hello")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, "hello", r.Response.Content[0].GetText().GetText())
	require.Equal(t, []string{"scrub:continue", "tag:annotate"}, hookActions(r.Response))
	require.Equal(t, map[string]string{"scanned": "yes"}, r.Response.Meta.Hooks[1].Annotations)
	require.Equal(t, []string{"scrub:echo:hello", "tag:echo:hello"}, log.take(), "priority order; the hooks' own calls are not hooked")

	r = echoCall(t, s, "my secret is 4711")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, "[redacted]", r.Response.Content[0].GetText().GetText())
	require.Equal(t, []string{"scrub:echo:my secret is 4711", "tag:echo:[redacted]"}, log.take(), "the later hook sees the redaction")
	stored := storedResult(t, s, r.Response.CallId)
	require.Equal(t, "[redacted]", stored.Content[0].GetText().GetText(), "the audit stores the redaction")
	require.NotContains(t, stored.String(), "4711")
	require.Equal(t, []string{"scrub:redact", "tag:annotate"}, hookActions(stored))

	r = echoCall(t, s, "withhold-me")
	require.False(t, r.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.Error.Type)
	require.Contains(t, r.Response.Error.Message, `hook "scrub" withheld the result of this call of "echo": not for your eyes`)
	require.Empty(t, r.Response.Content)
	require.Equal(t, []string{"scrub:echo:withhold-me"}, log.take(), "a withhold ends the hooks")

	// An answer the hook cannot give (content that is no MCP block) is its
	// failure: closed, the result is withheld.
	r = echoCall(t, s, "bad-content")
	require.False(t, r.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Response.Error.Type)
	require.Contains(t, r.Response.Error.Message, `after-hook "scrub" could not look at the result`)
	require.NotContains(t, storedResult(t, s, r.Response.CallId).String(), "bad-content")
	log.take()

	// A hook that does not answer in time withholds the result (failure:
	// closed, the default).
	r = echoCall(t, s, "slow")
	require.False(t, r.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Response.Error.Type)
	require.Contains(t, r.Response.Error.Message, "withheld (failure: closed)")
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Response.Error.PartialSideEffects, "echo is read-only")
	log.take()

	// A failed call stays failed, whatever the hook answers.
	rr, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "fail",
		ArgumentsJson: `{"type":"VALIDATION","message":"no"}`}, 30*time.Second)
	require.NoError(t, err)
	require.False(t, rr.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, rr.Response.Error.Type)
	require.Equal(t, "all fine", rr.Response.Content[0].GetText().GetText())
	require.Equal(t, []string{"scrub:replace"}, hookActions(rr.Response))
	log.take()

	// Tools no hook covers are not looked at; the call names no hook.
	sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`})
	require.NoError(t, err)
	resp := waitResult(t, s, sub.CallID)
	require.True(t, resp.Ok)
	require.Empty(t, resp.Meta.Hooks)
	require.Empty(t, log.take())
}

// failure: open stores the response unchanged when its after-hook fails.
func TestAfterHookFailOpen(t *testing.T) {
	t.Parallel()
	s, _ := afterHooksStack(t, strings.Replace(afterHooksDoc, "timeout: 3s}", "timeout: 3s, failure: open}", 1))
	r := echoCall(t, s, "slow")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, "slow", r.Response.Content[0].GetText().GetText())
	require.Equal(t, []string{"scrub:failed", "tag:annotate"}, hookActions(r.Response))
}

// An answer a fail-open hook cannot give leaves the response as it was
// (a redaction that fails wipes nothing); a reason is kept at 1 KiB.
func TestAfterHookAnswersTakenWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	s, _ := afterHooksStack(t, strings.Replace(afterHooksDoc, "timeout: 3s}", "timeout: 3s, failure: open}", 1))
	r := echoCall(t, s, "bad-redact")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, "bad-redact", r.Response.Content[0].GetText().GetText())
	require.JSONEq(t, `{"text":"bad-redact"}`, r.Response.StructuredJson)
	require.Equal(t, []string{"scrub:failed", "tag:annotate"}, hookActions(r.Response))

	r = echoCall(t, s, "long-reason")
	require.False(t, r.Response.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.Error.Type)
	reason := r.Response.Meta.Hooks[0].Reason
	require.LessOrEqual(t, len(reason), 1024)
	require.Equal(t, strings.Repeat("é", 512), reason, "cut on a character boundary")
}

// A result with more members and elements than a call's arguments may
// have (the after-hook's request holds it) is still looked at, not
// withheld for its size.
func TestAfterHookOnAResultOfManyValues(t *testing.T) {
	t.Parallel()
	s, log := afterHooksStack(t, `tenant: {default: allow}
hooks:
  - {id: scrub, phase: after, tool: scrub, tools: [rows], timeout: 10s}
`)
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "rows",
		ArgumentsJson: `{"n":5000}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, []string{"scrub:continue"}, hookActions(r.Response))
	require.Len(t, log.take(), 1)
}
