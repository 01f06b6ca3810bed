package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// watch collects the events Watch delivers for callID.
func watch(t *testing.T, c *client.Client, callID string) ([]*toolwirev1.CallEvent, error) {
	t.Helper()
	var events []*toolwirev1.CallEvent
	err := c.Watch(t.Context(), callID, func(ev *toolwirev1.CallEvent) error {
		events = append(events, ev)
		return nil
	})
	return events, err
}

func types(events []*toolwirev1.CallEvent) []toolwirev1.CallEventType {
	out := make([]toolwirev1.CallEventType, len(events))
	for i, ev := range events {
		out[i] = ev.GetType()
	}
	return out
}

func TestWatch(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	// A second replica with its own API: any replica streams any call.
	other := newClient(t, serve(t, b.stack.StartDispatcher(t, dispatch.Config{Name: "other"})))

	t.Run("ToFinishedThroughAnotherReplica", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "200ms", "text": "woke"})
		require.NoError(t, err)

		events, err := watch(t, other, sub.CallID)
		require.NoError(t, err, "nil after the FINISHED event")
		got := types(events)
		// ACCEPTED is stored once the call is queued, so a worker's
		// STARTED may land before it.
		require.Contains(t, got, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED)
		require.Contains(t, got, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED)
		last := events[len(events)-1]
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, last.GetType(), "%v", got)
		for _, ev := range events {
			require.Equal(t, sub.CallID, ev.GetCallId())
		}

		res := client.Final(last)
		require.NotNil(t, res)
		require.Equal(t, sub.CallID, res.CallID)
		require.True(t, res.OK())
		require.Equal(t, "woke", res.Text())
		require.Nil(t, client.Final(events[len(events)-2]), "only a terminal event carries a result")
	})

	t.Run("FinishedCallIsReplayed", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "echo", map[string]string{"text": "done"})
		require.NoError(t, err)

		events, err := watch(t, other, res.CallID)
		require.NoError(t, err)
		got := types(events)
		// A fast call waited on with Call leaves no ACCEPTED record: its
		// result is its record.
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, got[len(got)-1], "%v", got)
		require.Equal(t, "done", client.Final(events[len(events)-1]).Text())
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "echo", map[string]any{"text": 42})
		require.NoError(t, err)
		require.NotNil(t, sub.Result)

		events, err := watch(t, b.client, sub.CallID)
		require.NoError(t, err, "a rejection is terminal too")
		last := events[len(events)-1]
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, last.GetType())
		res := client.Final(last)
		require.NotNil(t, res)
		require.Equal(t, sub.CallID, res.CallID)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, client.ErrorTypeOf(res.Err()))
	})

	t.Run("UnknownCall", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"01J00000000000000000000000", "not-a-call-id"} {
			_, err := watch(t, other, id)
			require.ErrorIs(t, err, client.ErrUnknownCall, id)
			var se *client.StateError
			require.ErrorAs(t, err, &se)
			require.Equal(t, id, se.CallID)
		}
	})

	t.Run("CallbackErrorStops", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "30s"})
		require.NoError(t, err)

		stop := errors.New("seen enough")
		n := 0
		err = b.client.Watch(t.Context(), sub.CallID, func(*toolwirev1.CallEvent) error {
			n++
			return stop
		})
		require.ErrorIs(t, err, stop)
		require.Equal(t, 1, n, "nothing is delivered after fn fails")

		_, err = b.client.Cancel(t.Context(), sub.CallID, "test over")
		require.NoError(t, err)
		_, err = b.client.GetResult(t.Context(), sub.CallID, 30*time.Second)
		require.NoError(t, err)
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("Running", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "30s"})
		require.NoError(t, err)
		waitStarted(t, b.client, sub.CallID)

		out, err := b.client.Cancel(t.Context(), sub.CallID, "changed my mind")
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)

		start := time.Now()
		res, err := b.client.GetResult(t.Context(), sub.CallID, 30*time.Second)
		require.NoError(t, err)
		require.Less(t, time.Since(start), 20*time.Second, "the running sleep was interrupted")
		var te *client.ToolError
		require.ErrorAs(t, res.Err(), &te)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, te.Type)
		require.Contains(t, te.Message, "changed my mind", "the response records why")

		out, err = b.client.Cancel(t.Context(), sub.CallID, "again")
		require.NoError(t, err, "cancelling late is harmless")
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, out)
	})

	t.Run("Twice", func(t *testing.T) {
		t.Parallel()
		sub, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "30s"})
		require.NoError(t, err)

		out, err := b.client.Cancel(t.Context(), sub.CallID, "first")
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
		out, err = b.client.Cancel(t.Context(), sub.CallID, "second")
		require.NoError(t, err, "cancelling twice is harmless")
		require.Contains(t, []toolwirev1.CancelOutcome{toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED,
			toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED}, out, "still requested, unless the call already answered")

		res, err := b.client.GetResult(t.Context(), sub.CallID, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, client.ErrorTypeOf(res.Err()))
	})

	t.Run("Finished", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.Call(t.Context(), "echo", map[string]string{"text": "hi"})
		require.NoError(t, err)
		out, err := b.client.Cancel(t.Context(), res.CallID, "too late")
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, out)

		again, err := b.client.GetResult(t.Context(), res.CallID, 0)
		require.NoError(t, err)
		require.True(t, again.OK(), "nothing changed")
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"01J00000000000000000000000", "not-a-call-id"} {
			out, err := b.client.Cancel(t.Context(), id, "")
			require.NoError(t, err, id)
			require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, out, id)
		}
	})
}

// waitStarted watches callID until an attempt has started.
func waitStarted(t *testing.T, c *client.Client, callID string) {
	t.Helper()
	started := errors.New("started")
	err := c.Watch(t.Context(), callID, func(ev *toolwirev1.CallEvent) error {
		if ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED {
			return started
		}
		return nil
	})
	require.ErrorIs(t, err, started)
}

// A call queued behind the pool's one busy slot is answered CANCELLED by
// the time Cancel returns: GetResult without a wait has its answer.
func TestCancelQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Concurrency: 1})
	busy, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "30s"})
	require.NoError(t, err)
	waitStarted(t, b.client, busy.CallID)
	queued, err := b.client.Submit(t.Context(), "sleep", map[string]string{"duration": "30s"})
	require.NoError(t, err)
	b.stack.WaitAccepted(t, queued.CallID) // Submit sends it without waiting for the stream to store it

	out, err := b.client.Cancel(t.Context(), queued.CallID, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	res, err := b.client.GetResult(t.Context(), queued.CallID, 0)
	require.NoError(t, err, "answered by the time Cancel returned")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, client.ErrorTypeOf(res.Err()))
	require.Contains(t, res.Err().Error(), "changed my mind")

	_, err = b.client.Cancel(t.Context(), busy.CallID, "test over")
	require.NoError(t, err)
	_, err = b.client.GetResult(t.Context(), busy.CallID, 30*time.Second)
	require.NoError(t, err)
}
