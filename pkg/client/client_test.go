package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type bundle struct {
	stack  *dispatchtest.Stack
	client *client.Client
}

// setup starts a whole toolwire stack and a client of its API.
func setup(t *testing.T, opts dispatchtest.Options, copts ...client.Option) *bundle {
	t.Helper()
	stack := dispatchtest.Start(t, opts)
	return &bundle{stack: stack, client: newClient(t, stack.URL, copts...)}
}

// newClient returns a client of url on its own HTTP transport, whose idle
// connections are closed when the test ends.
func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(url, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: tr})}, opts...)...)
	require.NoError(t, err)
	return c
}

// serve serves the API of dispatcher d on a new HTTP server that also
// speaks HTTP/2 without TLS (h2c, for gRPC), with open access.
func serve(t *testing.T, d *dispatch.Dispatcher) string {
	t.Helper()
	svc, err := api.NewService(api.Config{Core: d, Approvals: d.Approvals(), Policies: d.PolicyOps(), Usage: d.LimitGate()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(svc.Handler(identity.OpenAccess{Identity: identity.Default}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestNew(t *testing.T) {
	t.Parallel()

	for _, url := range []string{"", "127.0.0.1:8080", "ftp://example.com", "http://", "://x"} {
		_, err := client.New(url)
		require.Error(t, err, "base URL %q", url)
	}
	_, err := client.New("https://toolwire.example.com/api")
	require.NoError(t, err)
}

func TestCall(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	h2c := serve(t, b.stack.Dispatcher)

	for _, tt := range []struct {
		name   string
		client *client.Client
	}{
		{"connect+proto", b.client},
		{"connect+json", newClient(t, b.stack.URL, client.WithJSON())},
		{"grpc", mustNew(t, h2c, client.WithGRPC())}, // the client's own h2c transport
		{"grpc+json", mustNew(t, h2c, client.WithGRPC(), client.WithJSON())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := tt.client.Call(t.Context(), "echo", map[string]string{"text": "hi"},
				client.WithSession("s-1"), client.WithUser("u-1"), client.WithRun("r-1"), client.WithTurn("t-1"))
			require.NoError(t, err)
			require.True(t, res.OK())
			require.NoError(t, res.Err())
			require.Equal(t, "hi", res.Text())
			require.NotEmpty(t, res.CallID)
			require.Equal(t, res.CallID, res.Response.GetCallId())
			require.Equal(t, "echo", res.Response.GetTool())
			require.Empty(t, res.Intents())

			var out builtin.EchoOutput
			require.NoError(t, res.Structured(&out))
			require.Equal(t, "hi", out.Text)
		})
	}
}

func mustNew(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	require.NoError(t, err)
	return c
}

func TestCallToolErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "echo", `{"text": 42}`)
		require.NoError(t, err, "a tool error is an answer, not a failed request")
		require.False(t, res.OK())
		require.Empty(t, res.Text())

		var te *client.ToolError
		require.ErrorAs(t, res.Err(), &te)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
		require.Equal(t, res.CallID, te.CallID)
		require.Equal(t, "echo", te.Tool)
		require.False(t, te.Retryable)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
		require.Len(t, te.Violations, 1)
		require.Equal(t, "/text", te.Violations[0].GetField())
		require.Contains(t, te.Error(), "VALIDATION")

		require.ErrorIs(t, res.Err(), &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION})
		require.ErrorIs(t, res.Err(), &client.ToolError{}, "an untyped target matches every tool error")
		require.NotErrorIs(t, res.Err(), &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND})
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, client.ErrorTypeOf(res.Err()))

		var out builtin.EchoOutput
		require.ErrorIs(t, res.Structured(&out), &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION})
	})

	t.Run("MissingField", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "echo", nil)
		require.NoError(t, err)
		var te *client.ToolError
		require.ErrorAs(t, res.Err(), &te)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
		require.Equal(t, []string{"/text"}, fields(te.Violations))
	})

	t.Run("UnknownTool", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "nosuch", nil)
		require.NoError(t, err)
		require.False(t, res.OK())
		var te *client.ToolError
		require.ErrorAs(t, res.Err(), &te)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, te.Type)
		require.Contains(t, te.Message, "nosuch")
		require.NotEmpty(t, te.Suggestion)
	})

	t.Run("FailedInWorker", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "fail", map[string]any{"type": "PERMANENT", "message": "no luck"})
		require.NoError(t, err)
		var te *client.ToolError
		require.ErrorAs(t, res.Err(), &te)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
		require.Contains(t, te.Message, "no luck")
		require.Equal(t, "worker", res.Response.GetMeta().GetSource())
	})
}

func fields(vs []*toolwirev1.FieldViolation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.GetField()
	}
	return out
}

func TestSubmitAndGetResult(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	sub, err := b.client.Submit(t.Context(), "echo", map[string]string{"text": "later"})
	require.NoError(t, err)
	require.NotEmpty(t, sub.CallID)
	require.Nil(t, sub.Result, "a queued call has no result yet")
	require.False(t, sub.Duplicate)

	res, err := b.client.GetResult(t.Context(), sub.CallID, 30*time.Second)
	require.NoError(t, err)
	require.True(t, res.OK())
	require.Equal(t, "later", res.Text())
	require.Equal(t, sub.CallID, res.CallID)

	// Any replica answers for any call: ask a second dispatcher with its own API.
	other := newClient(t, serve(t, b.stack.StartDispatcher(t, dispatch.Config{})))
	again, err := other.GetResult(t.Context(), sub.CallID, 0)
	require.NoError(t, err)
	require.Equal(t, "later", again.Text())
}

func TestSubmitRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	sub, err := b.client.Submit(t.Context(), "nosuch", nil)
	require.NoError(t, err)
	require.NotEmpty(t, sub.CallID, "a refused call has an id too, for the record")
	require.NotNil(t, sub.Result, "refused at admission: the result is known at once")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, client.ErrorTypeOf(sub.Result.Err()))

	res, err := b.client.GetResult(t.Context(), sub.CallID, 0)
	require.NoError(t, err, "the refusal is recorded and can be fetched by id")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, client.ErrorTypeOf(res.Err()))
}

func TestPending(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("WaitEnds", func(t *testing.T) {
		t.Parallel()
		_, err := b.client.Call(t.Context(), "sleep", map[string]string{"duration": "500ms", "text": "woke"},
			client.WithWait(time.Millisecond))
		require.ErrorIs(t, err, client.ErrPending)
		var se *client.StateError
		require.ErrorAs(t, err, &se)
		require.NotEmpty(t, se.CallID)

		res, err := b.client.GetResult(t.Context(), se.CallID, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, "woke", res.Text())
	})

	t.Run("ContextDeadline", func(t *testing.T) {
		t.Parallel()
		// The wait ends before ctx does, so the caller learns the call id
		// instead of a deadline error.
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := b.client.Call(ctx, "sleep", map[string]string{"duration": "1s"})
		require.ErrorIs(t, err, client.ErrPending)
		var se *client.StateError
		require.ErrorAs(t, err, &se)

		res, err := b.client.GetResult(t.Context(), se.CallID, 30*time.Second)
		require.NoError(t, err)
		require.True(t, res.OK())
	})

	t.Run("GetResultAtOnce", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "500ms"})
		require.NoError(t, err)
		_, err = b.client.GetResult(t.Context(), sub.CallID, 0)
		require.ErrorIs(t, err, client.ErrPending)

		res, err := b.client.GetResult(t.Context(), sub.CallID, 30*time.Second)
		require.NoError(t, err)
		require.True(t, res.OK())
	})
}

func TestGetResultUnknownCall(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	for _, id := range []string{"01J00000000000000000000000", "not-a-call-id"} {
		_, err := b.client.GetResult(t.Context(), id, 0)
		require.ErrorIs(t, err, client.ErrUnknownCall, id)
		require.NotErrorIs(t, err, client.ErrPending)
		var se *client.StateError
		require.ErrorAs(t, err, &se)
		require.Equal(t, id, se.CallID)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	args := map[string]string{"text": "once"}

	first, err := b.client.Call(t.Context(), "echo", args, client.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	second, err := b.client.Call(t.Context(), "echo", args, client.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.Equal(t, first.CallID, second.CallID, "the same key and arguments are the same call")
	require.Equal(t, "once", second.Text())

	sub, err := b.client.Submit(t.Context(), "echo", args, client.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.True(t, sub.Duplicate)
	require.Equal(t, first.CallID, sub.CallID)
	require.NotNil(t, sub.Result, "the earlier call has finished: its response")
	require.Equal(t, "once", sub.Result.Text())

	other, err := b.client.Call(t.Context(), "echo", map[string]string{"text": "twice"}, client.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, client.ErrorTypeOf(other.Err()))
}

// rawTool returns its exact argument bytes as a text block.
var rawTool = tool.Must(tool.New("raw", func(_ context.Context, in json.RawMessage) (string, error) {
	return string(in), nil
}))

func TestArgumentsExact(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{rawTool}})
	jsonClient := newClient(t, b.stack.URL, client.WithJSON())
	const bigJSON = `{"n":12345678901234567890123}`
	n, ok := new(big.Int).SetString("12345678901234567890123", 10)
	require.True(t, ok)

	for _, tt := range []struct {
		name string
		args any
		want string
	}{
		{"string", bigJSON, bigJSON},
		{"RawMessage", json.RawMessage(bigJSON), bigJSON},
		{"bytes", []byte(bigJSON), bigJSON},
		{"spacing and order kept", `{ "z" : 1,  "n":12345678901234567890123 }`, `{ "z" : 1,  "n":12345678901234567890123 }`},
		{"Go value", struct {
			N *big.Int `json:"n"`
		}{n}, bigJSON},
		{"json.Number", map[string]any{"n": json.Number("12345678901234567890123")}, bigJSON},
		{"no HTML escaping", map[string]string{"s": "<a&b>"}, `{"s":"<a&b>"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []*client.Client{b.client, jsonClient} {
				res, err := c.Call(t.Context(), "raw", tt.args)
				require.NoError(t, err)
				require.NoError(t, res.Err())
				require.Equal(t, tt.want, res.Text())
			}
		})
	}

	_, err := b.client.Call(t.Context(), "raw", map[string]any{"f": func() {}})
	require.Error(t, err, "arguments that cannot be encoded are refused before sending")
	require.False(t, errors.As(err, new(*connect.Error)), "no request was sent")
}

// keyAuth accepts one bearer key.
type keyAuth struct{ key string }

func (a keyAuth) Authenticate(r *http.Request) (identity.Identity, error) {
	if r.Header.Get("Authorization") != "Bearer "+a.key {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return identity.Identity{Tenant: "acme", Agent: "test", Scopes: []string{"*"}}, nil
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: keyAuth{key: "s3cret"}}, client.WithAPIKey("s3cret"))

	res, err := b.client.Call(t.Context(), "echo", map[string]string{"text": "hi"})
	require.NoError(t, err)
	require.Equal(t, "hi", res.Text())
	_, err = b.client.ListTools(t.Context())
	require.NoError(t, err)

	for name, c := range map[string]*client.Client{
		"no key":    newClient(t, b.stack.URL),
		"wrong key": newClient(t, b.stack.URL, client.WithAPIKey("guess")),
	} {
		_, err := c.Call(t.Context(), "echo", map[string]string{"text": "hi"})
		require.Error(t, err, name)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), name)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED, client.ErrorTypeOf(err), "a transport error is no tool error")
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	specs, err := b.client.ListTools(t.Context())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"echo", "sleep", "fail", "remember"}, names(specs))

	specs, err = b.client.ListTools(t.Context(), client.WithNameGlob("ec*"), client.WithExecutor(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE))
	require.NoError(t, err)
	require.Equal(t, []string{"echo"}, names(specs))
	specs, err = b.client.ListTools(t.Context(), client.WithExecutor(toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP))
	require.NoError(t, err)
	require.Empty(t, specs)

	spec, err := b.client.GetTool(t.Context(), "echo")
	require.NoError(t, err)
	require.Equal(t, "echo", spec.GetName())
	require.NotEmpty(t, spec.GetVersion())

	_, err = b.client.GetTool(t.Context(), "nosuch")
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))

	for _, f := range []toolwirev1.ToolFormat{toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI, toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC,
		toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI, toolwirev1.ToolFormat_TOOL_FORMAT_MCP} {
		all, err := b.client.ExportTools(t.Context(), f, client.WithNameGlob("echo"))
		require.NoError(t, err, f)
		require.True(t, json.Valid(all), f)
		require.Contains(t, string(all), `"echo"`, f)

		one, err := b.client.ExportTool(t.Context(), "echo", f)
		require.NoError(t, err, f)
		require.True(t, json.Valid(one), f)
		require.Contains(t, string(one), `"echo"`, f)
	}
	_, err = b.client.ExportTools(t.Context(), toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE)
	require.Error(t, err)
	_, err = b.client.ExportTool(t.Context(), "echo", toolwirev1.ToolFormat_TOOL_FORMAT_UNSPECIFIED)
	require.Error(t, err)
}

func names(specs []*toolwirev1.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.GetName()
	}
	return out
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	c := newClient(t, "http://"+unusedAddr(t))

	_, err := c.Call(t.Context(), "echo", map[string]string{"text": "hi"})
	require.Error(t, err)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.NotErrorIs(t, err, client.ErrPending)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.GetResult(ctx, "01J00000000000000000000000", 0)
	require.ErrorIs(t, err, context.Canceled)
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestResult(t *testing.T) {
	t.Parallel()

	text := func(s string) *toolwirev1.Content {
		return &toolwirev1.Content{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: s}}}
	}
	image := &toolwirev1.Content{Kind: &toolwirev1.Content_Image{Image: &toolwirev1.ImageContent{MimeType: "image/png"}}}
	res := &client.Result{CallID: "c", Response: &toolwirev1.ToolResponse{Ok: true,
		Content: []*toolwirev1.Content{text("a"), image, text("b")}}}
	require.Equal(t, "a\nb", res.Text(), "text blocks joined by newlines, others left out")
	require.Len(t, res.Content(), 3)
	require.ErrorIs(t, res.Structured(new(any)), client.ErrNoStructuredOutput)

	broken := &client.Result{Response: &toolwirev1.ToolResponse{Ok: false}}
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, client.ErrorTypeOf(broken.Err()),
		"a failed response without an error is still a tool error")
}

func TestToolError(t *testing.T) {
	t.Parallel()

	te := &client.ToolError{Tool: "search", Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Message: "slow down"}
	require.Equal(t, "toolwire: search: RATE_LIMIT: slow down", te.Error())
	wrapped := errors.Join(errors.New("context"), te)
	require.ErrorIs(t, wrapped, &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, client.ErrorTypeOf(wrapped))
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED, client.ErrorTypeOf(nil))
	require.Equal(t, "VALIDATION", client.TypeName(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION))
}
