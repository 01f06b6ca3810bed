package mcpserver_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// greetTool asks for a name, keeping the language of its arguments in its
// state, and greets with what it was told; it answers with the keys of the
// answers it got, so that a test sees which reached it.
func greetTool() *tool.Tool {
	type in struct {
		Lang string `json:"lang"`
	}
	return tool.Must(tool.New("greet", func(ctx context.Context, x in) (*tool.Result, error) {
		a := tool.InputFrom(ctx)
		var name struct{ Name string }
		if a == nil || string(a.State) != "lang="+x.Lang {
			return tool.NeedInput(map[string]tool.InputRequest{
				"who": tool.Elicit("Who are you?", map[string]any{"type": "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}),
			}, []byte("lang="+x.Lang)), nil
		}
		if ok, err := a.Elicited("who", &name); err != nil || !ok {
			return nil, tool.InvalidArgument("who", "no name")
		}
		keys := make([]string, 0, len(a.Responses))
		for k := range a.Responses {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text("hello " + name.Name + " (" + x.Lang + ")"),
			tool.Text("answers: " + strings.Join(keys, ","))}}, nil
	}))
}

// A go-sdk client of the stateless revision answers a tool's request for
// input by itself (its elicitation handler) and retries: two toolwire
// calls, the second continuing the first, the tool getting its state back.
func TestInputRequiredThroughTheFleet(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), greetTool())})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	asked := 0
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			require.Equal(t, "Who are you?", r.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"lang": "en"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, 1, asked)
	require.Equal(t, "hello Ada (en)", res.Content[0].(*mcp.TextContent).Text)

	t.Run("a client that cannot answer is told what it lacks", func(t *testing.T) {
		plain := connect(t, url, "any", "2026-07-28")
		_, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"lang": "en"}})
		var je *jsonrpc.Error
		require.ErrorAs(t, err, &je)
		require.Equal(t, int64(mcp.CodeMissingRequiredClientCapabilities), je.Code)
		require.JSONEq(t, `{"requiredCapabilities":{"elicitation":{}}}`, string(je.Data))
	})
	t.Run("an older revision's client is told the revision to use", func(t *testing.T) {
		old := connect(t, url, "any", "2025-11-25")
		_, err := old.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"lang": "en"}})
		require.ErrorContains(t, err, "2026-07-28")
	})
}

// The dispatcher hands a continuing call the state of the round it names
// only when that round is the caller's tenant's, of the same tool and
// arguments, asked for input and is fresh; the answers the round did not
// ask for are dropped.
func TestContinuationIsBoundToItsRound(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), greetTool())})
	d := s.Dispatcher
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	me := identity.Default
	call := func(d *dispatch.Dispatcher, id identity.Identity, cr *toolwirev1.CallRequest) *toolwirev1.ToolResponse {
		t.Helper()
		r, err := d.Call(ctx, id, cr, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
		return r.Response
	}
	first := call(d, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"en"}`})
	require.True(t, first.Ok)
	require.NotNil(t, first.InputRequired)
	require.Contains(t, first.InputRequired.Requests, "who")
	answer := map[string]string{"who": `{"action":"accept","content":{"name":"Ada"}}`, "extra": `{"action":"accept"}`}

	refused := func(t *testing.T, r *toolwirev1.ToolResponse, want string) {
		t.Helper()
		require.False(t, r.Ok)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Error.Type)
		require.Equal(t, dispatch.ContinuesField, r.Error.Violations[0].Field)
		require.Contains(t, r.Error.Message, want)
	}
	t.Run("other arguments", func(t *testing.T) {
		refused(t, call(d, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"fr"}`,
			Continues: first.CallId, InputResponsesJson: answer}), "arguments differ")
	})
	t.Run("another tool", func(t *testing.T) {
		refused(t, call(d, me, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`,
			Continues: first.CallId, InputResponsesJson: answer}), "not \"echo\"")
	})
	t.Run("another tenant", func(t *testing.T) {
		other := identity.Identity{Tenant: "other", Agent: "a", Scopes: []string{"*"}}
		refused(t, call(d, other, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"en"}`,
			Continues: first.CallId, InputResponsesJson: answer}), "no finished call")
	})
	t.Run("a call that asked for nothing", func(t *testing.T) {
		echo := call(d, me, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
		refused(t, call(d, me, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`,
			Continues: echo.CallId}), "did not ask for input")
	})
	t.Run("not a call id", func(t *testing.T) {
		refused(t, call(d, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"en"}`,
			Continues: first.CallId + "x"}), "not a call id")
	})
	t.Run("too late", func(t *testing.T) {
		late := s.StartDispatcher(t, dispatch.Config{InputTTL: time.Nanosecond})
		refused(t, call(late, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"en"}`,
			Continues: first.CallId, InputResponsesJson: answer}), "start over")
	})
	t.Run("an answer that is not an object", func(t *testing.T) {
		r := call(d, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"lang":"en"}`,
			Continues: first.CallId, InputResponsesJson: map[string]string{"who": `"Ada"`}})
		require.False(t, r.Ok)
		require.Equal(t, "input_responses_json", r.Error.Violations[0].Field)
	})
	t.Run("the same tenant, tool and arguments", func(t *testing.T) {
		// The same arguments in another spelling are the same.
		r := call(d, me, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{ "lang" : "en" }`,
			Continues: first.CallId, InputResponsesJson: answer})
		require.True(t, r.Ok, "%v", r.Error)
		require.Nil(t, r.InputRequired)
		require.Equal(t, "hello Ada (en)", r.Content[0].GetText().GetText())
		require.Equal(t, "answers: who", r.Content[1].GetText().GetText(), "only the answers asked for reach the tool")
	})
}

// A requestState the endpoint did not issue is invalid params, before
// anything runs.
func TestForeignRequestStateIsInvalidParams(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), greetTool())})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, state := range []string{"made-up", "toolwire-input.01ARZ3NDEKTSV4RRFFQ69G5FAV", "toolwire-input.nonsense"} {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
			"name": "greet", "arguments": map[string]any{"lang": "en"}, "requestState": state,
			"inputResponses": map[string]any{"who": map[string]any{"action": "accept", "content": map[string]any{"name": "x"}}},
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}})
		resp := postRPC(t, ctx, url, body)
		var got struct {
			Error *jsonrpc.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(resp, &got), string(resp))
		require.NotNil(t, got.Error, "state %q: %s", state, resp)
		require.Equal(t, int64(jsonrpc.CodeInvalidParams), got.Error.Code, "state %q: %s", state, resp)
	}
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}

// postRPC posts one JSON-RPC message of the stateless revision and returns
// the response message (the last data line of an event stream).
func postRPC(t *testing.T, ctx context.Context, url string, body []byte, header ...string) []byte {
	t.Helper()
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name   string `json:"name"`
			TaskID string `json:"taskId"`
			URI    string `json:"uri"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(body, &m))
	m.Params.Name = cmp.Or(m.Params.Name, m.Params.TaskID)
	if m.Method == "resources/read" {
		m.Params.Name = m.Params.URI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", m.Method)
	if m.Params.Name != "" {
		req.Header.Set("Mcp-Name", m.Params.Name)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last []byte
		for line := range strings.SplitSeq(string(out), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok {
				last = []byte(strings.TrimSpace(data))
			}
		}
		return last
	}
	return out
}

// A tool's input-required answer is held to its limits and to secrecy: a
// request quoting a secret argument is redacted, a state holding one is
// refused (it cannot be redacted and is stored with the response), and an
// answer that also returns output is the tool's bug.
func TestInputRequiredAnswersAreChecked(t *testing.T) {
	t.Parallel()
	type in struct {
		Token string `json:"token" toolwire:"secret"`
		Mode  string `json:"mode"`
	}
	asker := tool.Must(tool.New("asker", func(_ context.Context, x in) (*tool.Result, error) {
		ask := map[string]tool.InputRequest{"ok": tool.Elicit("Use token "+x.Token+"?", map[string]any{"type": "object"})}
		switch x.Mode {
		case "state":
			return tool.NeedInput(ask, []byte("token="+x.Token)), nil
		case "content":
			r := tool.NeedInput(ask, nil)
			r.Content = []*toolwirev1.Content{tool.Text("and output")}
			return r, nil
		case "method":
			return tool.NeedInput(map[string]tool.InputRequest{"x": {Method: "tools/call"}}, nil), nil
		case "big":
			return tool.NeedInput(ask, make([]byte, tool.MaxInputStateBytes+1)), nil
		}
		return tool.NeedInput(ask, nil), nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), asker)})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	call := func(mode string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "asker",
			ArgumentsJson: `{"token":"hunter2-secret","mode":"` + mode + `"}`}, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
		return r.Response
	}
	r := call("")
	require.True(t, r.Ok, "%v", r.Error)
	p := r.InputRequired.Requests["ok"].ParamsJson
	require.NotContains(t, p, "hunter2-secret")
	require.Contains(t, p, "Use token")
	for mode, want := range map[string]string{"state": "secret argument", "content": "no content",
		"method": "unknown method", "big": "at most"} {
		r := call(mode)
		require.False(t, r.Ok, mode)
		require.Nil(t, r.InputRequired, mode)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Error.Type, mode)
		require.Contains(t, r.Error.Message, want, mode)
		require.NotContains(t, r.Error.Message, "hunter2-secret", mode)
	}
}
