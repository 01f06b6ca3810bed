package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// overdueSettings are short timings for tests: a call is looked at 100ms
// after its deadline, a call without one 300ms after its admission.
var overdueSettings = maintenance.OverdueSettings{Grace: 100 * time.Millisecond, NoDeadline: 300 * time.Millisecond}

// fastRetries makes failed looks come back within 10 to 50ms.
func fastRetries(c maintenance.Config) maintenance.Config {
	c.RetryDelay, c.MaxRetryDelay = 10*time.Millisecond, 50*time.Millisecond
	return c
}

// accepted records c's admission as the dispatcher does: an ACCEPTED
// event on its event subject, with its deadline and spec version.
func (s bundle) accepted(t *testing.T, c *toolwirev1.ToolCall) {
	t.Helper()
	s.event(t, c, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, Caller: c.Caller,
		Time: c.AcceptedAt, Deadline: c.Deadline, SpecVersion: c.SpecVersion})
}

// event stores ev as an event of c.
func (s bundle) event(t *testing.T, c *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) {
	t.Helper()
	ev.CallId, ev.Tool = c.CallId, c.Tool
	data, err := proto.Marshal(ev)
	require.NoError(t, err)
	subject := s.b.Subjects.Event(c.Caller.Tenant, c.Dispatcher, c.CallId)
	_, err = s.b.JS.PublishMsg(t.Context(), s.b.Signer.SignedMsg(subject, signing.KindEvent, c.CallId, ev.Attempt, data, nil))
	require.NoError(t, err)
}

// registered stores version v1 of tool echo in the registry with the
// annotations given.
func (s bundle) registered(t *testing.T, a *toolwirev1.ToolAnnotations) {
	t.Helper()
	data, err := proto.Marshal(&toolwirev1.ToolSpec{Name: "echo", Version: "v1", Annotations: a})
	require.NoError(t, err)
	_, err = s.b.Registry.Put(t.Context(), registry.VersionKey("echo", "v1"), data)
	require.NoError(t, err)
}

// due returns call id's call of spec version v1, due in d.
func due(id string, d time.Duration) *toolwirev1.ToolCall {
	c := call(id, "default")
	c.SpecVersion, c.Deadline = "v1", timestamppb.New(time.Now().Add(d))
	return c
}

// answered waits until c has a result and returns it.
func (s bundle) answered(t *testing.T, c *toolwirev1.ToolCall) *toolwirev1.ToolResponse {
	t.Helper()
	var resp *toolwirev1.ToolResponse
	require.Eventually(t, func() bool { resp = s.result(t, c); return resp != nil }, 20*time.Second, 10*time.Millisecond,
		"call %s not answered", c.CallId)
	return resp
}

// An accepted call that has no result past its deadline is answered with
// what its events and its tool's spec show: never executed (its message
// never reached the calls stream; the tool records every attempt before
// it runs), UNKNOWN_OUTCOME when an attempt started or when nothing can
// be shown (an idempotent tool, a call without a deadline). A call with a
// result, or refused at admission, is left alone.
func TestOverdueSweeperAnswersAcceptedCallsWithoutAResult(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.registered(t, &toolwirev1.ToolAnnotations{Idempotent: proto.Bool(false)})
	sweeper := maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: fastRetries(s.cfg), OverdueSettings: overdueSettings})
	run(t, sweeper)

	// Looked at first: these two need no answer.
	withResult, refused := due("01J0000000000000000000OV01", 100*time.Millisecond), due("01J0000000000000000000OV02", 100*time.Millisecond)
	s.answer(t, withResult, &toolwirev1.ToolResponse{CallId: withResult.CallId, Ok: true})
	s.accepted(t, withResult)
	s.accepted(t, refused)
	s.event(t, refused, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
		Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED}})

	// Never stored in the calls stream: only its admission record exists.
	lost := due("01J0000000000000000000OV03", 400*time.Millisecond)
	s.accepted(t, lost)
	started := due("01J0000000000000000000OV04", 400*time.Millisecond)
	s.store(t, started)
	s.accepted(t, started)
	s.event(t, started, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, Attempt: 1, Worker: "w1",
		Time: timestamppb.Now()})
	unknownSpec := due("01J0000000000000000000OV05", 400*time.Millisecond)
	unknownSpec.SpecVersion = "v2"
	s.accepted(t, unknownSpec)
	noDeadline := call("01J0000000000000000000OV06", "default")
	s.accepted(t, noDeadline)

	resp := s.answered(t, lost)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, resp.GetError().GetType())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, resp.GetError().GetPartialSideEffects())
	require.Contains(t, resp.GetError().GetMessage(), "never executed")
	require.Equal(t, "dlq", resp.GetMeta().GetSource())
	require.Equal(t, lost.CallId, resp.CallId)

	resp = s.answered(t, started)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, resp.GetError().GetType())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, resp.GetError().GetPartialSideEffects())
	require.Contains(t, resp.GetError().GetMessage(), "attempt 1 started on worker w1")

	for _, c := range []*toolwirev1.ToolCall{unknownSpec, noDeadline} {
		resp = s.answered(t, c)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, resp.GetError().GetType(), c.CallId)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, resp.GetError().GetPartialSideEffects(), c.CallId)
	}
	require.Contains(t, resp.GetError().GetMessage(), "no schedule-to-close deadline")

	// The two looked at before the four answered kept what they had.
	require.True(t, s.result(t, withResult).GetOk(), "a result was replaced")
	require.Nil(t, s.result(t, refused), "a refused call was answered")
	require.Eventually(t, func() bool { return sweeper.Stats() == maintenance.OverdueStats{Answered: 4} }, 20*time.Second, 10*time.Millisecond)

	letters := s.deadLetters(t)
	require.Len(t, letters, 4)
	for _, dl := range letters {
		require.Equal(t, "overdue:test", dl.Worker)
		require.Nil(t, dl.Call, "an overdue call's dead letter must not be retryable")
		ev := &toolwirev1.CallEvent{}
		require.NoError(t, proto.Unmarshal(dl.Raw, ev))
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, ev.Type)
	}
}

// A sweeper started after a call was accepted finds it (the lookback) and
// answers it, also when its first looks fail: the DLQ stream is gone
// until it has failed three times.
func TestOverdueSweeperFindsCallsAcceptedBeforeItStartedAndRetries(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := due("01J0000000000000000000OV11", -time.Second)
	s.accepted(t, c)
	dlq := s.dropDLQ(t)

	failures := &counter{match: "looking at an overdue call failed"}
	cfg := fastRetries(s.cfg)
	cfg.Logger = slog.New(failures)
	run(t, maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: cfg, OverdueSettings: overdueSettings}))
	require.Eventually(t, func() bool { return failures.n.Load() >= 3 }, 20*time.Second, 10*time.Millisecond)
	require.Nil(t, s.result(t, c))

	_, err := s.b.JS.CreateStream(t.Context(), dlq)
	require.NoError(t, err)
	resp := s.answered(t, c)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, resp.GetError().GetType())
	require.Len(t, s.deadLetters(t), 1)
}

// The sweeper follows at most MaxTracked calls; what it drops is counted.
func TestOverdueSweeperBoundsWhatItTracks(t *testing.T) {
	t.Parallel()
	s := setup(t)
	settings := overdueSettings
	settings.MaxTracked = 1
	sweeper := maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: s.cfg, OverdueSettings: settings})
	run(t, sweeper)
	s.accepted(t, due("01J0000000000000000000OV21", time.Hour))
	s.accepted(t, due("01J0000000000000000000OV22", time.Hour))
	require.Eventually(t, func() bool {
		return sweeper.Stats() == maintenance.OverdueStats{Tracked: 1, Dropped: 1}
	}, 20*time.Second, 10*time.Millisecond)
}

// dropDLQ deletes the DLQ stream and returns its configuration, to make
// it again.
func (s bundle) dropDLQ(t *testing.T) jetstream.StreamConfig {
	t.Helper()
	info, err := s.b.DLQ.Info(t.Context())
	require.NoError(t, err)
	require.NoError(t, s.b.JS.DeleteStream(t.Context(), info.Config.Name))
	return info.Config
}

// counter is a slog.Handler counting the records whose message contains
// match.
type counter struct {
	match string
	n     atomic.Int64
}

func (c *counter) Enabled(context.Context, slog.Level) bool { return true }

func (c *counter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, c.match) {
		c.n.Add(1)
	}
	return nil
}

func (c *counter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *counter) WithGroup(string) slog.Handler      { return c }

// A followed call is dropped once its believed result is stored, whether
// the result is read after its admission record or before it (the two
// streams are read by two consumers, which need not keep step): the
// sweeper does not keep answered calls until they fall due (an hour for
// a call without a deadline), which filled MaxTracked within the hour at
// 28 calls a second and then dropped the admission records of calls it
// should follow. A result that is not believed drops nothing.
func TestOverdueSweeperDropsAnsweredCalls(t *testing.T) {
	t.Parallel()
	s := setup(t)
	sweeper := maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: s.cfg, OverdueSettings: overdueSettings})
	run(t, sweeper)
	tracked := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return sweeper.Stats().Tracked == n }, 20*time.Second, 10*time.Millisecond, "want %d calls followed", n)
	}

	first := due("01J0000000000000000000OV31", time.Hour)
	s.accepted(t, first)
	tracked(1)
	s.answer(t, first, &toolwirev1.ToolResponse{CallId: first.CallId, Ok: true})
	tracked(0)

	// A result before its call's record: the call is looked at at once,
	// not when it falls due. The marker's record, stored after the early
	// call's, is followed once that one was read.
	early := due("01J0000000000000000000OV32", time.Hour)
	s.answer(t, early, &toolwirev1.ToolResponse{CallId: early.CallId, Ok: true})
	s.accepted(t, early)
	marker := due("01J0000000000000000000OV33", time.Hour)
	s.accepted(t, marker)
	tracked(1) // the marker alone: the early call was read and dropped
	s.answer(t, marker, &toolwirev1.ToolResponse{CallId: marker.CallId, Ok: true})
	tracked(0)

	// A forged result drops nothing.
	forged := due("01J0000000000000000000OV34", time.Hour)
	s.accepted(t, forged)
	tracked(1)
	data, err := proto.Marshal(&toolwirev1.ToolResponse{CallId: forged.CallId, Tool: forged.Tool, Ok: true})
	require.NoError(t, err)
	_, err = s.b.JS.Publish(t.Context(), s.b.Subjects.Result(forged.Caller.Tenant, forged.Dispatcher, forged.CallId), data)
	require.NoError(t, err)
	marker = due("01J0000000000000000000OV35", time.Hour)
	s.accepted(t, marker)
	tracked(2)
	s.answer(t, marker, &toolwirev1.ToolResponse{CallId: marker.CallId, Ok: true})
	tracked(1) // the marker's result, stored after the forgery, is read: the forged call stays
	require.Zero(t, sweeper.Stats().Answered)
}
