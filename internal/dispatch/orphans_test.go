package dispatch_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A call on a subject that no pool consumer filters is dead-lettered and
// answered NOT_FOUND by the dispatchers' sweeper: a raw publish for an
// unknown executor type, or for a tool no pool serves. Before, such a call
// stayed in CALLS for ever, with no dead letter and no answer. A call that
// cannot be answered safely (not a call; a subject naming another tenant
// than the payload) is dead-lettered raw and answered nowhere. Calls on
// subjects a pool consumes are never touched.
func TestCallsNoPoolConsumesAreDeadLetteredAndAnswered(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: dispatch.Config{OrphanSweep: 50 * time.Millisecond, OrphanGrace: time.Millisecond}})
	ctx := t.Context()
	b := s.Env.Bus
	publish := func(subject string, data []byte) {
		t.Helper()
		_, err := b.JS.Publish(ctx, subject, data)
		require.NoError(t, err)
	}
	raw := func(id, tenant, tool string, typ toolwirev1.ExecutorType) []byte {
		data, err := proto.Marshal(&toolwirev1.ToolCall{CallId: id, Tool: tool, Arguments: []byte(`{"text":"x"}`),
			Caller: &toolwirev1.Caller{Tenant: tenant, Session: "s1"}, Dispatcher: "d1", Executor: typ, Provider: "builtin",
			AcceptedAt: timestamppb.Now()})
		require.NoError(t, err)
		return data
	}
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE

	// An admitted call runs as ever.
	ok, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, ok.Response.Ok, "%v", ok.Response.Error)

	publish("toolwire.call.bogus.default.builtin.echo", raw("01J000000000000000000000D1", "default", "echo", toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED))
	publish(b.Subjects.Call(native, "default", "builtin", "nosuchtool"), raw("01J000000000000000000000D2", "default", "nosuchtool", native))
	publish("toolwire.call.bogus.x.y.z", []byte("\xff\xfe not a call"))
	publish("toolwire.call.bogus.evil.builtin.echo", raw("01J000000000000000000000D3", "victim", "echo", toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED))
	publish("toolwire.call.short", raw("01J000000000000000000000D4", "default", "echo", native))

	for _, id := range []string{"01J000000000000000000000D1", "01J000000000000000000000D2"} {
		// No dispatcher admitted these: unknown until the sweep answers
		// them (a wait is not spent on an id nobody admitted).
		var g *toolwirev1.GetResultResponse
		require.Eventually(t, func() bool {
			var err error
			g, err = s.Dispatcher.GetResult(ctx, identity.Default, id, 0)
			require.NoError(t, err)
			return g.State == toolwirev1.CallState_CALL_STATE_DONE
		}, 20*time.Second, 10*time.Millisecond, id)
		e := g.Response.GetError()
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, e.GetType(), id)
		require.False(t, e.Retryable, id)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, e.PartialSideEffects, id)
		require.Contains(t, e.Message, "no worker pool consumes", id)
		require.Equal(t, "dlq", g.Response.Meta.Source, id)
		require.Equal(t, "s1", g.Response.Meta.Session, id)
	}
	letters := waitDeadLetters(t, s, 5)
	byID := map[string]*toolwirev1.DeadLetter{}
	var rawLetters []*toolwirev1.DeadLetter
	for _, dl := range letters {
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, dl.LastError.GetType())
		if dl.Call == nil {
			rawLetters = append(rawLetters, dl)
			continue
		}
		byID[dl.Call.CallId] = dl
	}
	require.Contains(t, byID, "01J000000000000000000000D1")
	require.Contains(t, byID, "01J000000000000000000000D2")
	require.Len(t, rawLetters, 3, "the garbage, the smuggled tenant and the short subject, raw")
	for _, tenant := range []string{"victim", "evil"} {
		_, err := b.Results.GetLastMsgForSubject(ctx, b.Subjects.Result(tenant, "d1", "01J000000000000000000000D3"))
		require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "no answer on a stranger's word (%s)", tenant)
	}

	// Later sweeps end nothing twice: once a call published after the
	// five (on a subject that sorts last, so its sweep looked at every
	// other subject first) is dead-lettered, there are exactly six.
	publish("toolwire.call.zzz.default.builtin.echo", raw("01J000000000000000000000D5", "default", "echo", toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED))
	letters = waitDeadLetters(t, s, 6)
	require.Len(t, letters, 6)
	require.Equal(t, "01J000000000000000000000D5", letters[5].GetCall().GetCallId())
	for _, dl := range letters {
		require.NotEqual(t, ok.CallId, dl.GetCall().GetCallId(), "an admitted call was swept")
	}
}

// waitDeadLetters polls the DLQ stream until it holds at least n records
// and returns all of them.
func waitDeadLetters(t *testing.T, s *dispatchtest.Stack, n uint64) []*toolwirev1.DeadLetter {
	t.Helper()
	var info *jetstream.StreamInfo
	require.Eventually(t, func() bool {
		var err error
		info, err = s.Env.Bus.DLQ.Info(t.Context())
		return err == nil && info.State.Msgs >= n
	}, 30*time.Second, 10*time.Millisecond, "dead letters")
	var out []*toolwirev1.DeadLetter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.Env.Bus.DLQ.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		dl := &toolwirev1.DeadLetter{}
		require.NoError(t, proto.Unmarshal(m.Data, dl))
		out = append(out, dl)
	}
	return out
}
