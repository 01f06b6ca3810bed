package dispatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

func call(t *testing.T, c toolwirev1connect.DispatcherServiceClient, o *toolwirev1.CallRequest) *toolwirev1.CallResponse {
	t.Helper()
	o.Wait = durationpb.New(20 * time.Second)
	resp, err := c.Call(t.Context(), connect.NewRequest(o))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
	return resp.Msg
}

func args(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

func TestCallEcho(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", Arguments: args(t, map[string]any{"text": "hi"})})
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.Equal(t, "hi", r.Response.Content[0].GetText().Text)
	require.JSONEq(t, `{"text":"hi"}`, r.Response.StructuredJson)
	require.Equal(t, r.CallId, r.Response.CallId)
	require.NotEmpty(t, r.Response.Meta.SpecVersion)
	require.Equal(t, int32(1), r.Response.Meta.Attempt)
}

// Rejections are answered as envelopes and never reach the calls stream.
func TestAdmissionRejectionsAreNeverQueued(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	cases := []struct {
		name  string
		opts  *toolwirev1.CallRequest
		typ   toolwirev1.ErrorType
		field string
	}{
		{"missing field", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{}`}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "/text"},
		{"wrong type", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":5}`}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "/text"},
		{"unknown field", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"a","txt":"b"}`}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "/txt"},
		{"not json", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":`}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, ""},
		{"too deep", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: deep}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, ""},
		{"too big", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"` + strings.Repeat("x", 300<<10) + `"}`}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, ""},
		{"unknown tool", &toolwirev1.CallRequest{Tool: "nope"}, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, ""},
		{"unknown version", &toolwirev1.CallRequest{Tool: "echo", SpecVersion: "abc", ArgumentsJson: `{"text":"a"}`}, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, ""},
		{"no tool", &toolwirev1.CallRequest{}, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "tool"},
	}
	for _, tc := range cases {
		r := call(t, s.Client, tc.opts)
		require.False(t, r.Response.Ok, tc.name)
		e := r.Response.Error
		require.Equal(t, tc.typ, e.Type, "%s: %s", tc.name, e.Message)
		require.False(t, e.Retryable, tc.name)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, e.PartialSideEffects, tc.name)
		require.Equal(t, "dispatcher", r.Response.Meta.Source, tc.name)
		if tc.field != "" {
			var fields []string
			for _, v := range e.Violations {
				fields = append(fields, v.Field)
			}
			require.Contains(t, fields, tc.field, tc.name)
			require.Contains(t, e.Message, strings.TrimPrefix(tc.field, "/"), tc.name)
		}
		// A rejected call id answers its rejection from any replica.
		g, err := s.Client.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: r.CallId}))
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.Msg.State, tc.name)
		require.Equal(t, tc.typ, g.Msg.Response.Error.Type, tc.name)
	}
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "no rejected call may reach the calls stream")
}

// The raw string form reaches the tool byte for byte, big integers included.
func TestArgumentsJSONArriveExactly(t *testing.T) {
	t.Parallel()
	raw := tool.Must(tool.New("raw", func(_ context.Context, in json.RawMessage) (string, error) { return string(in), nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{raw}})
	const exact = `{"n": 123456789012345678901234567890, "f": 1.0000000000000000001, "s":"\u00e9"}`
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "raw", ArgumentsJson: exact})
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.Equal(t, exact, r.Response.Content[0].GetText().Text)
}

func TestGetResultStates(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	// An id nobody admitted is NOT_FOUND, not a state: recent or old,
	// well-formed or not, with a wait or without.
	for _, id := range []string{"01HZZZZZZZZZZZZZZZZZZZZZZZ", ulid.Make().String(), "not-an-id"} {
		_, err := s.Client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: id, Wait: durationpb.New(time.Second)}))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), id)
	}

	sub, err := s.Client.Submit(ctx, connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "sleep", ArgumentsJson: `{"duration":"300ms"}`}))
	require.NoError(t, err)
	require.Nil(t, sub.Msg.Response)
	g, err := s.Client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: sub.Msg.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_PENDING, g.Msg.State)
	g, err = s.Client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: sub.Msg.CallId, Wait: durationpb.New(20 * time.Second)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.Msg.State)
	require.True(t, g.Msg.Response.Ok)
}

// A call submitted, its dispatcher stopped before the result, a dispatcher
// started again: GetResult returns the result.
func TestResultSurvivesDispatcherRestart(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true, Tools: builtin.Tools()})
	ctx := t.Context()
	first := s.StartDispatcher(t, dispatch.Config{Name: "first"})
	// Register the tools without serving them yet: a worker that starts
	// and stops at once publishes its specs.
	w := s.StartWorker(t, builtin.Tools()...)
	require.NoError(t, w.Stop(ctx))
	s.WaitTool(t, "echo")

	sub, err := first.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"later"}`})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	require.NoError(t, first.Stop(ctx))

	s.StartWorker(t, builtin.Tools()...)
	second := s.StartDispatcher(t, dispatch.Config{Name: "second"})
	g, err := second.GetResult(ctx, identity.Default, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.True(t, g.Response.Ok)
	require.Equal(t, "later", g.Response.Content[0].GetText().Text)

	// Another tenant cannot read it (a recent id answers PENDING for any
	// tenant: its record may not be written yet).
	other := identity.Identity{Tenant: "other", Agent: "a", Scopes: []string{"*"}}
	g, err = second.GetResult(ctx, other, sub.CallID, 0)
	require.NoError(t, err)
	require.NotEqual(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.Nil(t, g.Response)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	o := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"once"}`, IdempotencyKey: "k1"}
	a := call(t, s.Client, o)
	b := call(t, s.Client, o)
	require.Equal(t, a.CallId, b.CallId)
	require.True(t, b.Response.Ok)
	c := call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"other"}`, IdempotencyKey: "k1"})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, c.Response.Error.Type)
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

func TestPanickingToolAnswersInternal(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"PANIC"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, r.Response.Error.Type)
	require.Contains(t, r.Response.Error.Message, "panic")
	// The worker is unharmed.
	r = call(t, s.Client, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"alive"}`})
	require.True(t, r.Response.Ok)
}

func TestToolErrorsPassThrough(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"AUTH","message":"bad token"}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_AUTH, r.Response.Error.Type)
	require.Equal(t, "bad token", r.Response.Error.Message)
	require.Equal(t, "worker", r.Response.Meta.Source)
}

type keyAuth struct{}

func (keyAuth) Authenticate(r *http.Request) (identity.Identity, error) {
	if r.Header.Get("Authorization") != "Bearer secret" {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}, nil
}

func TestUnauthenticatedIsRefused(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: keyAuth{}})
	_, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo"}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))

	req := connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	req.Header().Set("Authorization", "Bearer secret")
	resp, err := s.Client.Call(t.Context(), req)
	require.NoError(t, err)
	require.True(t, resp.Msg.Response.Ok)
}

func TestListAndGetTools(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	l, err := s.Client.ListTools(ctx, connect.NewRequest(&toolwirev1.ListToolsRequest{}))
	require.NoError(t, err)
	var names []string
	for _, sp := range l.Msg.Tools {
		names = append(names, sp.Name)
	}
	require.Equal(t, []string{"echo", "fail", "remember", "sleep"}, names)
	for _, f := range []toolwirev1.ToolFormat{toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI, toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC,
		toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI, toolwirev1.ToolFormat_TOOL_FORMAT_MCP} {
		l, err := s.Client.ListTools(ctx, connect.NewRequest(&toolwirev1.ListToolsRequest{Format: f, NameGlob: "ec*"}))
		require.NoError(t, err)
		require.True(t, json.Valid([]byte(l.Msg.ToolsJson)), f.String())
		require.Contains(t, l.Msg.ToolsJson, `"echo"`, f.String())
	}
	g, err := s.Client.GetTool(ctx, connect.NewRequest(&toolwirev1.GetToolRequest{Name: "echo"}))
	require.NoError(t, err)
	require.Equal(t, "echo", g.Msg.Tool.Name)
	_, err = s.Client.GetTool(ctx, connect.NewRequest(&toolwirev1.GetToolRequest{Name: "nope"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}

// The JSON form an LLM toolchain or curl sends: flat, with arguments as an
// object.
func TestCallOverPlainJSON(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	body := strings.NewReader(`{"tool":"echo","arguments":{"text":"hi"}}`)
	resp, err := http.Post(s.URL+"/toolwire.v1.DispatcherService/Call", "application/json", body)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		State    string `json:"state"`
		Response struct {
			Ok      bool `json:"ok"`
			Content []struct {
				Text struct {
					Text string `json:"text"`
				} `json:"text"`
			} `json:"content"`
		} `json:"response"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "CALL_STATE_DONE", out.State)
	require.True(t, out.Response.Ok)
	require.Equal(t, "hi", out.Response.Content[0].Text.Text)
}

// An idempotency key outlives the stream's duplicate window: the same key
// and arguments still give the same call, executed once.
func TestIdempotencyKeyOutlivesDedupWindow(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{DuplicateWindow: 100 * time.Millisecond},
		Dispatcher: dispatch.Config{PublishHorizon: 50 * time.Millisecond}})
	o := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"once"}`, IdempotencyKey: "late"}
	a := call(t, s.Client, o)
	time.Sleep(300 * time.Millisecond) // the condition under test: the duplicate window passes
	b := call(t, s.Client, o)
	require.Equal(t, a.CallId, b.CallId)
	require.True(t, b.Response.Ok)
	info, err := s.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "queued once")
}

// Tenants are subject tokens and KV keys: an API key file with a tenant
// that cannot be one is refused.
func TestAPIKeyTenantsAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(tenant string) string {
		p := filepath.Join(dir, tenant+".yaml")
		body := "keys:\n  - sha256: " + strings.Repeat("ab", 32) + "\n    tenant: \"" + tenant + "\"\n    agent: bot\n"
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	_, err := identity.LoadAPIKeys(write("acme-eu_1"))
	require.NoError(t, err)
	for _, bad := range []string{"acme.eu", "acme:eu", "zoë", "a*"} {
		_, err := identity.LoadAPIKeys(write(bad))
		require.ErrorContains(t, err, "tenant", bad)
	}
}

// A refusal's REJECTED event records the names its caller sent cut: a
// 200 KiB unknown tool name or session is stored as a short one.
func TestRejectedEventCutsNames(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	huge := strings.Repeat("n", 200<<10)
	for _, o := range []*toolwirev1.CallRequest{{Tool: huge}, {Tool: "echo", ArgumentsJson: `{"text":"a"}`, Session: huge}} {
		r := call(t, s.Client, o)
		require.False(t, r.Response.Ok)
		m, err := bus.LastMsg(t.Context(), s.Env.Bus.Events, s.Env.Bus.Subjects.EventsAnyDispatcher("default", r.CallId))
		require.NoError(t, err)
		var ev toolwirev1.CallEvent
		require.NoError(t, proto.Unmarshal(m.Data, &ev))
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, ev.Type)
		require.LessOrEqual(t, len(ev.Tool), 256, "tool")
		require.LessOrEqual(t, len(ev.GetCaller().GetSession()), 256, "session")
		require.Less(t, len(m.Data), 4<<10, "the stored event")
	}
}
