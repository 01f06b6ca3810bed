package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A call whose schedule-to-start deadline passes while the worker records
// its start (here: the STARTED claim of a tool that is not safe to rerun,
// held while the events stream refuses it) is answered EXPIRED and never
// runs: the deadline is checked once the start is recorded, not only
// before. An earlier version checked it before the claim alone, and ran
// calls that started up to 0.8 s late under overload.
func TestCallWhoseStartIsRecordedPastItsDeadlineNeverRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	effect := tool.Must(tool.New("effect", func(context.Context, empty) (string, error) {
		runs.Add(1)
		return "done", nil
	})) // neither read-only nor idempotent: its start is a durable claim
	// Two slots, both held by a blocking call until the claim is refused.
	entered, release := make(chan struct{}, 2), make(chan struct{})
	block := tool.Must(tool.New("block", func(context.Context, empty) (string, error) {
		entered <- struct{}{}
		<-release
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	ctx := t.Context()
	w := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{}, effect, block)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	for range 2 {
		_, err := s.Dispatcher.Submit(ctx, dispatchIdentity, &toolwirev1.CallRequest{Tool: "block"})
		require.NoError(t, err)
	}
	for range 2 {
		<-entered
	}

	const s2s = 3 * time.Second
	sub, err := s.Dispatcher.Submit(ctx, dispatchIdentity, &toolwirev1.CallRequest{Tool: "effect", ScheduleToStart: durationpbNew(s2s)})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	deadline := time.Now().Add(s2s)

	// The call's events hold its ACCEPTED record; from now on the events
	// stream refuses a second event of any call: the STARTED claim is held.
	events := s.Env.Bus.Events
	require.Eventually(t, func() bool {
		_, err := events.GetLastMsgForSubject(ctx, s.Env.Bus.Subjects.Event(dispatchIdentity.Tenant, s.Dispatcher.Name(), sub.CallID))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	info, err := events.Info(ctx)
	require.NoError(t, err)
	open := info.Config
	shut := open
	shut.MaxMsgsPerSubject, shut.Discard, shut.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	_, err = s.Env.Bus.JS.UpdateStream(ctx, shut)
	require.NoError(t, err)
	close(release) // a slot frees: the worker takes the call
	answered := func() bool {
		g, err := s.Dispatcher.GetResult(ctx, dispatchIdentity, sub.CallID, 0)
		return err == nil && g.State == toolwirev1.CallState_CALL_STATE_DONE
	}
	// Held past its deadline (or, on a slow machine, answered before the
	// claim was tried: then there is nothing to see).
	require.Eventually(t, func() bool {
		return (w.Stats().Held > 0 && time.Now().After(deadline)) || answered()
	}, 30*time.Second, 10*time.Millisecond)
	_, err = s.Env.Bus.JS.UpdateStream(ctx, open)
	require.NoError(t, err)

	g, err := s.Dispatcher.GetResult(ctx, dispatchIdentity, sub.CallID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.False(t, g.Response.Ok, "a call whose start was recorded past its schedule-to-start ran")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, g.Response.Error.Type, g.Response.Error.Message)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, g.Response.Error.PartialSideEffects)
	require.Zero(t, runs.Load(), "the tool ran")
}
