package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/tools/builtin"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A full calls stream refuses new calls explicitly: OVERLOADED, retryable,
// with a retry_after; nothing already queued is dropped.
func TestFullCallsStreamAnswersOverloaded(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{CallsMaxBytes: 8 << 10}})
	ctx := t.Context()
	big := `{"text":"` + strings.Repeat("x", 1000) + `"}`
	var accepted []string
	var refused *toolwirev1.ToolResponse
	for range 100 {
		sub, err := s.Dispatcher.Submit(ctx, dispatch.DefaultIdentity, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: big})
		require.NoError(t, err)
		if sub.Rejected != nil {
			refused = sub.Rejected
			break
		}
		accepted = append(accepted, sub.CallID)
	}
	require.NotNil(t, refused, "a full stream must refuse")
	require.NotEmpty(t, accepted)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, refused.Error.Type)
	require.True(t, refused.Error.Retryable)
	require.Positive(t, refused.Error.RetryAfter.AsDuration())
	for _, id := range accepted {
		g, err := s.Dispatcher.GetResult(ctx, dispatch.DefaultIdentity, id, 20*time.Second)
		require.NoError(t, err)
		if g.State != toolwirev1.CallState_CALL_STATE_DONE {
			cons, _ := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
			if cons != nil {
				ci, _ := cons.Info(ctx)
				t.Logf("consumer: %+v delivered=%+v ackfloor=%+v pending=%d ackpending=%d redelivered=%d waiting=%d", ci.Config.FilterSubjects, ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
			}
			si, _ := s.Env.Bus.Calls.Info(ctx)
			t.Logf("calls: %+v", si.State)
			ri, _ := s.Env.Bus.Results.Info(ctx, jetstream.WithSubjectFilter(">"))
			t.Logf("results: %d %v", ri.State.Msgs, ri.State.Subjects)
			ei, _ := s.Env.Bus.Events.Info(ctx, jetstream.WithSubjectFilter(">"))
			t.Logf("events: %d %v", ei.State.Msgs, ei.State.Subjects)
		}
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State, "call %s", id)
		require.True(t, g.Response.Ok, "every accepted call still runs")
	}
}

// Too many callers waiting on one replica: OVERLOADED, not an unbounded
// pile of waiters.
func TestTooManyWaitersAnswersOverloaded(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	release := make(chan struct{})
	hold := tool.Must(tool.New("hold", func(context.Context, struct{}) (string, error) {
		close(running)
		<-release
		return "held", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{hold, builtin.Tools()[0]}, Dispatcher: dispatch.Config{MaxWaiting: 1}})
	ctx := t.Context()
	done := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, _ := s.Dispatcher.Call(ctx, dispatch.DefaultIdentity, &toolwirev1.CallRequest{Tool: "hold"}, 20*time.Second)
		done <- r
	}()
	<-running // the first caller is waiting: its waiter was registered before the call was queued
	r, err := s.Dispatcher.Call(ctx, dispatch.DefaultIdentity, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Response.GetError().GetType())
	require.True(t, r.Response.Error.Retryable)
	// The refusal is recorded: GetResult answers it, here as anywhere.
	g, err := s.Dispatcher.GetResult(ctx, dispatch.DefaultIdentity, r.CallId, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, g.Response.GetError().GetType())
	close(release)
	require.True(t, (<-done).Response.Ok)
}
