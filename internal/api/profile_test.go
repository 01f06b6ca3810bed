package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The Toolwire-Client-Profile header renders a Call's and a GetResult's
// answer with that profile: a Claude-profile caller gets no openai/* key
// and the structured content as text; without the header the response is
// as the tool gave it; a name that is no profile is INVALID_ARGUMENT, and
// the call does not run.
func TestProfileHeaderRendersAnswers(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	widget := tool.Must(tool.New("widget", func(context.Context, struct{}) (*tool.Result, error) {
		runs.Add(1)
		return &tool.Result{Structured: []byte(`{"n":1}`),
			Meta: []byte(`{"openai/widgetState":{"z":1},"acme.example/k":"v"}`)}, nil
	}, tool.WithDescription("A widget's data")))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{widget}})
	ask := func(profile string) (*connect.Response[toolwirev1.CallResponse], error) {
		req := connect.NewRequest(&toolwirev1.CallRequest{Tool: "widget", ArgumentsJson: "{}", Wait: durationpb.New(20 * time.Second)})
		if profile != "" {
			req.Header().Set(profiles.Header, profile)
		}
		return s.Client.Call(t.Context(), req)
	}

	plain, err := ask("")
	require.NoError(t, err)
	require.JSONEq(t, `{"openai/widgetState":{"z":1},"acme.example/k":"v"}`, plain.Msg.GetResponse().GetMetaJson())
	require.Empty(t, plain.Msg.GetResponse().GetContent())

	claude, err := ask("claude")
	require.NoError(t, err)
	require.JSONEq(t, `{"acme.example/k":"v"}`, claude.Msg.GetResponse().GetMetaJson())
	require.Equal(t, `{"n":1}`, claude.Msg.GetResponse().GetContent()[0].GetText().GetText())

	g := connect.NewRequest(&toolwirev1.GetResultRequest{CallId: plain.Msg.GetCallId()})
	g.Header().Set(profiles.Header, "claude")
	got, err := s.Client.GetResult(t.Context(), g)
	require.NoError(t, err)
	require.JSONEq(t, `{"acme.example/k":"v"}`, got.Msg.GetResponse().GetMetaJson())
	g = connect.NewRequest(&toolwirev1.GetResultRequest{CallId: plain.Msg.GetCallId()})
	g.Header().Set(profiles.Header, "chatgpt")
	got, err = s.Client.GetResult(t.Context(), g)
	require.NoError(t, err)
	require.JSONEq(t, `{"openai/widgetState":{"z":1},"acme.example/k":"v"}`, got.Msg.GetResponse().GetMetaJson())

	_, err = ask("netscape")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Equal(t, int64(2), runs.Load(), "the refused request ran nothing")
}

// The methods that do not render their answer refuse the header
// (INVALID_ARGUMENT) rather than answer as if rendered: Watch, ListTools,
// GetTool, GetOutput. Submit takes it: an unknown name is refused before
// anything runs, a configured one is accepted.
func TestProfileHeaderOnMethodsThatDoNotRender(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	echo := tool.Must(tool.New("echo1", func(context.Context, struct{}) (string, error) {
		runs.Add(1)
		return "hi", nil
	}, tool.WithDescription("Says hi")))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{echo}})
	ctx := t.Context()
	done, err := s.Client.Call(ctx, connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo1", ArgumentsJson: "{}",
		Wait: durationpb.New(20 * time.Second)}))
	require.NoError(t, err)
	id := done.Msg.GetCallId()
	named := func(r interface{ Header() http.Header }) { r.Header().Set(profiles.Header, "claude") }

	lt := connect.NewRequest(&toolwirev1.ListToolsRequest{})
	named(lt)
	_, err = s.Client.ListTools(ctx, lt)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "ListTools: %v", err)
	gt := connect.NewRequest(&toolwirev1.GetToolRequest{Name: "echo1"})
	named(gt)
	_, err = s.Client.GetTool(ctx, gt)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "GetTool: %v", err)
	gout := connect.NewRequest(&toolwirev1.GetOutputRequest{CallId: id})
	named(gout)
	_, err = s.Client.GetOutput(ctx, gout)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "GetOutput: %v", err)
	w := connect.NewRequest(&toolwirev1.WatchRequest{CallId: id})
	named(w)
	st, err := s.Client.Watch(ctx, w)
	require.NoError(t, err)
	for st.Receive() {
	}
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(st.Err()), "Watch: %v", st.Err())
	require.NoError(t, st.Close())

	sub := connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "echo1", ArgumentsJson: "{}"})
	sub.Header().Set(profiles.Header, "netscape")
	_, err = s.Client.Submit(ctx, sub)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	sub = connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "echo1", ArgumentsJson: "{}"})
	named(sub)
	_, err = s.Client.Submit(ctx, sub)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 30*time.Second, 20*time.Millisecond,
		"the refused Submit ran nothing; the named one ran")
}
