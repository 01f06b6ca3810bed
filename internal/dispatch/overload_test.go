package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
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
		require.True(t, g.Response.Ok, "every accepted call still runs")
	}
}

// Too many callers waiting on one replica: OVERLOADED, not an unbounded
// pile of waiters.
func TestTooManyWaitersAnswersOverloaded(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: dispatch.Config{MaxWaiting: 1}})
	ctx := t.Context()
	done := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, _ := s.Dispatcher.Call(ctx, dispatch.DefaultIdentity, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"2s"}`}, 20*time.Second)
		done <- r
	}()
	require.Eventually(t, func() bool {
		r, err := s.Dispatcher.Call(ctx, dispatch.DefaultIdentity, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, time.Second)
		return err == nil && r.Response.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED
	}, 10*time.Second, 10*time.Millisecond)
	r := <-done
	require.True(t, r.Response.Ok)
}
