package api_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Through the API, a call (Call and Submit alike) in a session that
// END_SESSION ended is refused SESSION_INACTIVE, and GetResult answers the
// refusal later.
func TestEndedSessionThroughAPI(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.EndSession(t, "s-end", "the user left")

	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: "s-end"})
	require.False(t, r.Response.GetOk())
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), `session "s-end" has ended: the user left`)

	sub, err := s.Client.Submit(t.Context(), connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: "s-end"}))
	require.NoError(t, err)
	got, err := s.Client.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: sub.Msg.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, got.Msg.Response.GetError().GetType())

	require.True(t, call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: "s-other"}).Response.GetOk())
}

// modesPolicy declares a voice mode that forbids sleep outright.
const modesPolicy = `
tenant:
  default: allow
modes:
  voice:
    rules:
      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses on a call}
  text: {}
`

// ListTools with a session leaves out the tools the session's mode
// forbids outright, in the native list and in every export format; the
// same list for another session, or for none, has them.
func TestModeHidesToolsThroughAPI(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, modesPolicy)
	s.SetMode(t, "s-voice", "voice")
	s.SetMode(t, "s-text", "text")
	names := func(session string) []string {
		resp, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Session: session}))
		require.NoError(t, err)
		var out []string
		for _, spec := range resp.Msg.Tools {
			out = append(out, spec.GetName())
		}
		return out
	}
	require.NotContains(t, names("s-voice"), "sleep")
	require.Contains(t, names("s-voice"), "echo")
	require.Contains(t, names("s-text"), "sleep", "another mode does not forbid it")
	require.Contains(t, names("s-none"), "sleep", "a session without a mode")
	require.Contains(t, names(""), "sleep", "no session")

	for _, f := range []toolwirev1.ToolFormat{toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI, toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC,
		toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI, toolwirev1.ToolFormat_TOOL_FORMAT_MCP} {
		export := func(session string) string {
			resp, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Format: f, Session: session}))
			require.NoError(t, err)
			return resp.Msg.ToolsJson
		}
		require.NotContains(t, export("s-voice"), `"sleep"`, "%s", f)
		require.Contains(t, export("s-voice"), `"echo"`, "%s", f)
		require.Contains(t, export("s-text"), `"sleep"`, "%s", f)
		require.Contains(t, export(""), `"sleep"`, "%s", f)
	}
}
