package maintenance_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/maintenance"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A call whose every delivery crashed gets a dead letter and a terminal
// MAX_ATTEMPTS answer, once however often its advisory comes; a call
// answered meanwhile keeps its answer and gets no dead letter; a message
// that is no call is dead-lettered raw and answered nowhere.
func TestReaperEndsExhaustedCalls(t *testing.T) {
	t.Parallel()
	s := setup(t)
	run(t, maintenance.NewReaper(s.cfg))
	b := s.b
	exhausted, answered := call("01J000000000000000000000R1", "default"), call("01J000000000000000000000R2", "default")
	seqs := []uint64{s.store(t, exhausted), s.store(t, answered)}
	s.answer(t, answered, &toolwirev1.ToolResponse{CallId: answered.CallId, Ok: true})
	ack, err := b.JS.Publish(t.Context(), b.Subjects.Call(exhausted.Executor, "default", "builtin", "garbage"), []byte("\xff\xfe not a call"))
	require.NoError(t, err)
	seqs = append(seqs, ack.Sequence, seqs[0]) // the first advisory comes twice

	advisories := strings.Replace(bus.MaxDeliverAdvisories(b.Config.CallsStream()), "*", b.Config.PoolConsumer("native"), 1)
	for _, seq := range seqs {
		data, err := json.Marshal(map[string]any{"stream": b.Config.CallsStream(), "stream_seq": seq, "deliveries": 3})
		require.NoError(t, err)
		_, err = b.JS.Publish(t.Context(), advisories, data)
		require.NoError(t, err)
	}
	settled(t, b.Advisories, b.Config.ReaperConsumer(), uint64(len(seqs)))

	resp := s.result(t, exhausted)
	require.NotNil(t, resp)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS, resp.GetError().GetType())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, resp.GetError().GetPartialSideEffects())
	require.Equal(t, "dlq", resp.GetMeta().GetSource())
	require.True(t, s.result(t, answered).GetOk(), "an answer was replaced")

	letters := s.deadLetters(t)
	require.Len(t, letters, 2)
	require.Equal(t, exhausted.CallId, letters[0].GetCall().GetCallId())
	require.Equal(t, "MaxDeliver exhausted", letters[0].Reason)
	require.Equal(t, int32(3), letters[0].Attempts)
	require.Equal(t, "reaper:test", letters[0].Worker)
	require.Nil(t, letters[1].Call)
	require.Equal(t, []byte("\xff\xfe not a call"), letters[1].Raw)
}

// The reaper never drops an advisory: while its call cannot be ended (the
// DLQ stream is gone), it is tried again, more often than the old bound
// of 10 deliveries, and ended once it can be.
func TestReaperRetriesForAsLongAsItTakes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := s.b
	dlq := s.dropDLQ(t)
	failures := &counter{match: "reaping exhausted call failed"}
	cfg := fastRetries(s.cfg)
	cfg.Logger = slog.New(failures)
	run(t, maintenance.NewReaper(cfg))

	exhausted := call("01J000000000000000000000R3", "default")
	seq := s.store(t, exhausted)
	data, err := json.Marshal(map[string]any{"stream": b.Config.CallsStream(), "stream_seq": seq, "deliveries": 5})
	require.NoError(t, err)
	_, err = b.JS.Publish(t.Context(), strings.Replace(bus.MaxDeliverAdvisories(b.Config.CallsStream()), "*", b.Config.PoolConsumer("native"), 1), data)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return failures.n.Load() > 10 }, 60*time.Second, 10*time.Millisecond)
	require.Nil(t, s.result(t, exhausted))

	_, err = b.JS.CreateStream(t.Context(), dlq)
	require.NoError(t, err)
	resp := s.answered(t, exhausted)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS, resp.GetError().GetType())
	require.Len(t, s.deadLetters(t), 1)
}
