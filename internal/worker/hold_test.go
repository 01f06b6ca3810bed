package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// holdSetup is a worker serving one tool that is not safe to rerun, on a
// pool with a short AckWait and two deliveries per call: a delivery that
// handed its call back on every failed lookup would spend them within
// seconds, and one that stopped its heartbeats would lose the call to a
// redelivery after a second.
type holdSetup struct {
	t    *testing.T
	s    *dispatchtest.Stack
	w    *worker.Worker
	raw  rawCalls
	runs *atomic.Int32
	pool jetstream.Consumer
}

func startHold(t *testing.T, name string, fn func(context.Context, empty) (string, error)) *holdSetup {
	t.Helper()
	runs := &atomic.Int32{}
	pay := tool.Must(tool.New(name, func(ctx context.Context, in empty) (string, error) {
		runs.Add(1)
		return fn(ctx, in)
	})) // neither idempotent nor read-only
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{}, bus.PoolConfig{AckWait: time.Second, MaxDeliver: 2}, pay)
	pool, err := s.Env.Bus.Calls.Consumer(t.Context(), s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	return &holdSetup{t: t, s: s, w: w, raw: rawCalls{t, s}, runs: runs, pool: pool}
}

func paid(context.Context, empty) (string, error) { return "paid", nil }

// waitHeld waits until the worker has tried failed steps again n times
// while holding its call: with the backoff from 250 ms, four tries take
// more than three AckWaits.
func (h *holdSetup) waitHeld(n int64) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.w.Stats().Held >= n }, time.Minute, 10*time.Millisecond,
		"the worker did not hold the call")
}

// deliveredOnce asserts the pool delivered exactly one message, once.
func (h *holdSetup) deliveredOnce() {
	h.t.Helper()
	ci, err := h.pool.Info(h.t.Context())
	require.NoError(h.t, err)
	require.Equal(h.t, uint64(1), ci.Delivered.Consumer, "deliveries")
	require.Zero(h.t, ci.NumRedelivered)
}

// swapStream deletes stream and creates cfg in its place; it returns the
// deleted stream's config.
func swapStream(t *testing.T, js jetstream.JetStream, stream string, cfg *jetstream.StreamConfig) jetstream.StreamConfig {
	t.Helper()
	ctx := t.Context()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	old := s.CachedInfo().Config
	require.NoError(t, js.DeleteStream(ctx, stream))
	if cfg != nil {
		_, err = js.CreateStream(ctx, *cfg)
		require.NoError(t, err)
	}
	return old
}

// A redelivered call whose lookups fail (here the events stream is gone,
// as while its leader is cut off) is held, heartbeats going on, and
// looked up again until the stream answers; then it runs, once, on the
// delivery that looked. Before, every failed lookup handed the call back
// and spent one of its deliveries (issue 26: 41 accepted calls were lost
// that way during a partition).
func TestFailedLookupsHoldTheCall(t *testing.T) {
	t.Parallel()
	h := startHold(t, "pay_after_lookup", paid)
	js := h.s.Env.Bus.JS
	events := swapStream(t, js, h.s.Env.Bus.Config.EventsStream(), nil)

	// Put back after a scheduled retry of attempt 1: a redelivery, which
	// looks up the result and the last attempt event.
	call := h.raw.call("01J00000000000000000000H01", "pay_after_lookup", `{}`)
	call.Attempt = 1
	h.raw.publish(call)
	h.waitHeld(4)
	require.Zero(t, h.runs.Load(), "run without its events looked up")
	h.deliveredOnce()

	_, err := js.CreateStream(t.Context(), events)
	require.NoError(t, err)
	r := waitResult(t, h.s, "default", "d1", call.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(2), r.Meta.Attempt)
	require.Equal(t, int32(1), h.runs.Load())
	h.deliveredOnce()
}

// A tool that is not safe to rerun runs only once its STARTED event is
// stored; while the events stream refuses it (full, discarding new
// messages) the delivery holds the call and tries again, and runs it
// once the stream stores again — exactly once, on the same delivery.
// (Issue 12, finding B: the worker ran it without the record; issue 26:
// handing it back instead spent its deliveries.)
func TestNoDurableStartedNoExecution(t *testing.T) {
	t.Parallel()
	h := startHold(t, "pay_once", paid)
	ctx := t.Context()
	b := h.s.Env.Bus
	// Fill the events stream: one message, at most one, new ones refused.
	_, err := b.JS.Publish(ctx, b.Subjects.Event("default", "filler", "filler"), []byte("x"))
	require.NoError(t, err)
	open := fill(t, b.JS, b.Events)
	_, err = b.JS.Publish(ctx, b.Subjects.Event("default", "filler", "probe"), []byte("x"))
	require.Error(t, err, "the events stream refuses new messages")

	call := h.raw.call("01J00000000000000000000H02", "pay_once", `{}`)
	h.raw.publish(call)
	h.waitHeld(4)
	require.Zero(t, h.runs.Load(), "run without a stored STARTED event")
	h.deliveredOnce()

	_, err = b.JS.UpdateStream(ctx, open)
	require.NoError(t, err)
	r := waitResult(t, h.s, "default", "d1", call.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(1), h.runs.Load(), "run exactly once")
	h.deliveredOnce()
	require.Zero(t, h.w.Stats().NotStarted)
}

// fill makes stream refuse new messages (at most the ones it holds,
// discarding new ones) and returns its config before.
func fill(t *testing.T, js jetstream.JetStream, stream jetstream.Stream) jetstream.StreamConfig {
	t.Helper()
	info, err := stream.Info(t.Context())
	require.NoError(t, err)
	require.Positive(t, info.State.Msgs)
	full := info.Config
	full.MaxMsgs, full.Discard = int64(info.State.Msgs), jetstream.DiscardNew
	_, err = js.UpdateStream(t.Context(), full)
	require.NoError(t, err)
	return info.Config
}

// A STARTED stored whose claim cannot be read back (the events before it
// unreadable: here the stream the worker reads is gone while another
// stores the events, as when the leader that stored it failed) leaves
// the attempt unrun only while the delivery holds the call: once the
// events read back, the same delivery runs it. Before, the call was left
// unrun after 10 s and its next delivery answered UNKNOWN_OUTCOME for a
// tool that never ran (issue 26: 93 of 114 such answers).
func TestUnconfirmedStartHoldsTheCall(t *testing.T) {
	t.Parallel()
	h := startHold(t, "pay_after_read_back", paid)
	js := h.s.Env.Bus.JS
	name := h.s.Env.Bus.Config.EventsStream()
	s, err := js.Stream(t.Context(), name)
	require.NoError(t, err)
	alt := s.CachedInfo().Config
	alt.Name = name + "_ALT"
	events := swapStream(t, js, name, &alt)
	// Another call's event first: the STARTED is not the stream's first
	// message, so there are events before it to read back.
	_, err = js.Publish(t.Context(), h.s.Env.Bus.Subjects.Event("default", "filler", "filler"), []byte("x"))
	require.NoError(t, err)

	call := h.raw.call("01J00000000000000000000H03", "pay_after_read_back", `{}`)
	h.raw.publish(call)
	h.waitHeld(4)
	require.Zero(t, h.runs.Load(), "run on an unconfirmed claim")
	h.deliveredOnce()
	altStream, err := js.Stream(t.Context(), alt.Name)
	require.NoError(t, err)
	ai, err := altStream.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(2), ai.State.Msgs, "the filler and the STARTED event, stored once")

	swapStream(t, js, alt.Name, &events)
	r := waitResult(t, h.s, "default", "d1", call.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(1), h.runs.Load())
	h.deliveredOnce()
	require.Zero(t, h.w.Stats().UnknownOutcomes)
}

// A result the worker computed survives the results stream refusing it
// for longer than the three tries that used to end in a redelivery
// (issue 26: after a RESULTS leader kill, 42 completed calls were answered
// UNKNOWN_OUTCOME): the delivery holds the call and publishes again until
// the stream stores it, and the caller gets the tool's result.
func TestHeldResultSurvivesAnUnavailableResultsStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	h := startHold(t, "pay_then_publish", func(ctx context.Context, _ empty) (string, error) {
		running <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "paid", nil
	})
	ctx := t.Context()
	b := h.s.Env.Bus
	_, err := b.JS.Publish(ctx, b.Subjects.Result("default", "filler", "filler"), []byte("x"))
	require.NoError(t, err)

	call := h.raw.call("01J00000000000000000000H04", "pay_then_publish", `{}`)
	h.raw.publish(call)
	<-running
	open := fill(t, b.JS, b.Results)
	close(release)
	h.waitHeld(4)
	h.deliveredOnce()

	_, err = b.JS.UpdateStream(ctx, open)
	require.NoError(t, err)
	r := waitResult(t, h.s, "default", "d1", call.CallId)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(1), h.runs.Load())
	h.deliveredOnce()
	require.Zero(t, h.w.Stats().UnknownOutcomes)
}

// A redelivery that finds an attempt another worker started moments ago
// without a result waits for the result that worker may still store —
// it holds a computed result through an election, and a pool consumer's
// new leader redelivers calls whose first delivery lives — instead of
// answering UNKNOWN_OUTCOME at once (issue 26: a completed tool answered
// UNKNOWN_OUTCOME by a redelivery on another worker). The stored result
// is the earlier worker's, and nothing runs again.
func TestRedeliveryWaitsForTheEarlierWorkersResult(t *testing.T) {
	t.Parallel()
	h := startHold(t, "pay_awaited", paid)
	ctx := t.Context()
	b := h.s.Env.Bus
	call := h.raw.call("01J00000000000000000000H05", "pay_awaited", `{}`)
	// Attempt 1 started on another worker, which has not stored its
	// result yet.
	ev, err := proto.Marshal(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED,
		CallId: call.CallId, Tool: call.Tool, Attempt: 1, Worker: "elsewhere", Time: timestamppb.Now()})
	require.NoError(t, err)
	// Signed as every record is (with the stack's key, which its
	// dispatcher believes).
	_, err = b.JS.PublishMsg(ctx, b.Signer.SignedMsg(b.Subjects.Event("default", "d1", call.CallId), signing.KindEvent, call.CallId, 1, ev, nil))
	require.NoError(t, err)
	call.Attempt = 1 // a redelivery
	h.raw.publish(call)
	require.Eventually(t, func() bool { return h.w.Stats().Awaited == 1 }, time.Minute, 10*time.Millisecond)

	// The other worker stores its result.
	theirs, err := proto.Marshal(&toolwirev1.ToolResponse{CallId: call.CallId, Tool: call.Tool, Ok: true,
		Meta: &toolwirev1.ResponseMeta{Worker: "elsewhere", Attempt: 1}})
	require.NoError(t, err)
	_, err = b.JS.PublishMsg(ctx, b.Signer.SignedMsg(b.Subjects.Result("default", "d1", call.CallId), signing.KindResult, call.CallId, 1, theirs, nil))
	require.NoError(t, err)
	settled(t, h.s)
	r := waitResult(t, h.s, "default", "d1", call.CallId)
	require.True(t, r.Ok)
	require.Equal(t, "elsewhere", r.Meta.Worker)
	require.Zero(t, h.runs.Load())
	require.Zero(t, h.w.Stats().UnknownOutcomes)
}
