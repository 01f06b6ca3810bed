package dlq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type bundle struct {
	env   *bustest.Env
	queue *dlq.Queue
}

// setup starts a JetStream server with the layout of prefix and opens
// its dead-letter queue.
func setup(t *testing.T, prefix string) *bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{Prefix: prefix})
	q, err := dlq.Open(t.Context(), env.Bus.NC, prefix)
	require.NoError(t, err)
	return &bundle{env: env, queue: q}
}

// deadCall returns a call of tool as a worker would have dead-lettered it.
func deadCall(tool string) *toolwirev1.ToolCall {
	accepted := time.Now().Add(-time.Hour)
	return &toolwirev1.ToolCall{
		CallId: ulid.Make().String(), Tool: tool, SpecVersion: "v-" + tool, Arguments: []byte(`{"n": 12345678901234567890}`),
		Caller:         &toolwirev1.Caller{Tenant: "acme", Agent: "agent-1", Session: "s-1", Scopes: []string{"*"}},
		IdempotencyKey: "k-1", Attempt: 3, AcceptedAt: timestamppb.New(accepted),
		ScheduleToStartDeadline: timestamppb.New(accepted.Add(time.Minute)), Deadline: timestamppb.New(accepted.Add(2 * time.Minute)),
		StartToClose: durationpb.New(10 * time.Second), ApprovalToken: "approval-1", Dispatcher: "d-1",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Provider: "builtin",
	}
}

// write stores a dead letter of call (nil: an undecodable one) and
// returns its sequence.
func (b *bundle) write(t *testing.T, call *toolwirev1.ToolCall, reason string) uint64 {
	t.Helper()
	s := b.env.Bus.Subjects
	dl := &toolwirev1.DeadLetter{Call: call, Reason: reason, Attempts: 3, Time: timestamppb.Now(), Worker: "w-1",
		LastError: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: "upstream down"}}
	subject := s.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "_unknown", "_unknown", "_unknown")
	if call == nil {
		dl.Raw = []byte("\xffnot a call")
		dl.Subject = "toolwire.call.native.acme.builtin.garbled"
	} else {
		dl.Subject = s.Call(call.Executor, call.Caller.GetTenant(), call.Provider, call.Tool)
		subject = s.DLQ(call.Executor, call.Caller.GetTenant(), call.Provider, call.Tool)
	}
	data, err := proto.Marshal(dl)
	require.NoError(t, err)
	ack, err := b.env.Bus.JS.Publish(t.Context(), subject, data)
	require.NoError(t, err)
	return ack.Sequence
}

func seqs(letters []*dlq.Letter) []uint64 {
	out := make([]uint64, len(letters))
	for i, l := range letters {
		out[i] = l.Seq
	}
	return out
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	letters, err := b.queue.List(t.Context(), dlq.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, letters, "an empty DLQ")

	var all []uint64
	for i := range 5 {
		all = append(all, b.write(t, deadCall(fmt.Sprintf("tool%d", i%2)), fmt.Sprintf("reason %d", i)))
	}
	raw := b.write(t, nil, "undecodable")
	all = append(all, raw)

	letters, err = b.queue.List(t.Context(), dlq.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, all, seqs(letters), "every letter, oldest first")
	require.Equal(t, "tool0", letters[0].Tool())
	require.Equal(t, "reason 0", letters[0].Record.GetReason())
	require.NotEmpty(t, letters[0].Record.GetCall().GetCallId())
	require.WithinDuration(t, time.Now(), letters[0].Time(), time.Minute)
	require.WithinDuration(t, time.Now(), letters[0].Stored, time.Minute)
	require.Equal(t, "_unknown", letters[5].Tool(), "an undecodable call's tool comes from the subject")
	require.Nil(t, letters[5].Record.GetCall())

	letters, err = b.queue.List(t.Context(), dlq.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, all[4:], seqs(letters), "the newest Limit")

	letters, err = b.queue.List(t.Context(), dlq.ListOptions{Tool: "tool1"})
	require.NoError(t, err)
	require.Equal(t, []uint64{all[1], all[3]}, seqs(letters))

	letters, err = b.queue.List(t.Context(), dlq.ListOptions{Tool: "tool0", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []uint64{all[4]}, seqs(letters))

	letters, err = b.queue.List(t.Context(), dlq.ListOptions{Tool: "nosuch"})
	require.NoError(t, err)
	require.Empty(t, letters)

	_, err = b.queue.List(t.Context(), dlq.ListOptions{Limit: -1})
	require.Error(t, err)
}

func TestListManyLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	const n = 600 // several fetch batches
	var last uint64
	for range n {
		last = b.write(t, deadCall("bulk"), "bulk")
	}
	letters, err := b.queue.List(t.Context(), dlq.ListOptions{})
	require.NoError(t, err)
	require.Len(t, letters, n)
	letters, err = b.queue.List(t.Context(), dlq.ListOptions{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []uint64{last - 2, last - 1, last}, seqs(letters))

	// Listing leaves no consumer on DLQ: each fetch's replaced consumer and
	// the last one are deleted, not left for the inactivity threshold.
	info, err := b.env.Bus.DLQ.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers)
}

func TestGet(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	call := deadCall("search")
	seq := b.write(t, call, "attempts exhausted")

	l, err := b.queue.Get(t.Context(), seq)
	require.NoError(t, err)
	require.Equal(t, seq, l.Seq)
	require.Equal(t, "toolwire.dlq.native.acme.builtin.search", l.Subject)
	require.True(t, proto.Equal(call, l.Record.GetCall()))
	require.Equal(t, "attempts exhausted", l.Record.GetReason())
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, l.Record.GetLastError().GetType())

	for _, missing := range []uint64{0, seq + 1, 1 << 40} {
		_, err = b.queue.Get(t.Context(), missing)
		require.ErrorIs(t, err, dlq.ErrNotFound, "sequence %d", missing)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, "acme-prod") // a prefix other than the default
	dead := deadCall("search")
	seq := b.write(t, dead, "attempts exhausted")

	before := time.Now()
	call, err := b.queue.Retry(t.Context(), seq)
	require.NoError(t, err)

	t.Run("NewCall", func(t *testing.T) {
		require.NotEqual(t, dead.CallId, call.CallId)
		id, err := ulid.ParseStrict(call.CallId)
		require.NoError(t, err, "a fresh ULID")
		require.WithinDuration(t, time.Now(), ulid.Time(id.Time()), time.Minute)

		for name, eq := range map[string]bool{
			"tool":           call.Tool == dead.Tool,
			"spec version":   call.SpecVersion == dead.SpecVersion,
			"arguments":      string(call.Arguments) == string(dead.Arguments),
			"caller":         proto.Equal(call.Caller, dead.Caller),
			"dispatcher":     call.Dispatcher == dead.Dispatcher,
			"executor":       call.Executor == dead.Executor,
			"provider":       call.Provider == dead.Provider,
			"approval":       call.ApprovalToken == dead.ApprovalToken,
			"start to close": proto.Equal(call.StartToClose, dead.StartToClose),
		} {
			require.True(t, eq, "%s is carried over", name)
		}
		require.Zero(t, call.Attempt, "attempt reset")
		require.False(t, call.AcceptedAt.AsTime().Before(before.Truncate(time.Second)), "accepted now")
		require.Nil(t, call.ScheduleToStartDeadline, "deadlines dropped")
		require.Nil(t, call.Deadline, "deadlines dropped")
		require.Empty(t, call.IdempotencyKey, "the key names the original call")
	})

	t.Run("QueuedInCalls", func(t *testing.T) {
		s := b.env.Bus.Subjects
		m, err := b.env.Bus.Calls.GetLastMsgForSubject(t.Context(), s.Call(dead.Executor, "acme", dead.Provider, dead.Tool))
		require.NoError(t, err)
		require.Equal(t, "acme-prod.call.native.acme.builtin.search", m.Subject)
		require.Equal(t, call.CallId, m.Header.Get(jetstream.MsgIDHeader), "deduplicated by the new call id")
		got := &toolwirev1.ToolCall{}
		require.NoError(t, proto.Unmarshal(m.Data, got))
		require.True(t, proto.Equal(call, got))
	})

	t.Run("AdmissionRecord", func(t *testing.T) {
		m, err := b.env.Bus.Events.GetLastMsgForSubject(t.Context(), b.env.Bus.Subjects.Event("acme", dead.Dispatcher, call.CallId))
		require.NoError(t, err)
		ev := &toolwirev1.CallEvent{}
		require.NoError(t, proto.Unmarshal(m.Data, ev))
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, ev.Type)
		require.Equal(t, call.CallId, ev.CallId)
		require.Equal(t, "search", ev.Tool)
		require.True(t, proto.Equal(dead.Caller, ev.Caller))
		require.Contains(t, ev.Message, dead.CallId)
	})

	t.Run("AgainIsAnotherCall", func(t *testing.T) {
		again, err := b.queue.Retry(t.Context(), seq)
		require.NoError(t, err)
		require.NotEqual(t, call.CallId, again.CallId)
		letters, err := b.queue.List(t.Context(), dlq.ListOptions{})
		require.NoError(t, err)
		require.Equal(t, []uint64{seq}, seqs(letters), "the dead letter stays")
	})
}

func TestRetryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	raw := b.write(t, nil, "undecodable call")
	_, err := b.queue.Retry(t.Context(), raw)
	require.ErrorIs(t, err, dlq.ErrNotRetryable)
	require.Contains(t, err.Error(), "undecodable call")

	_, err = b.queue.Retry(t.Context(), raw+1)
	require.ErrorIs(t, err, dlq.ErrNotFound)

	// A call whose tenant is no valid tenant name is never retried under a
	// mapped one (a.b as a_b).
	dotted := deadCall("echo")
	dotted.Caller.Tenant = "a.b"
	_, err = b.queue.Retry(t.Context(), b.write(t, dotted, "tenant"))
	require.ErrorIs(t, err, dlq.ErrNotRetryable)
	require.Contains(t, err.Error(), `"a.b"`)

	info, err := b.env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing was queued")
}

func TestOpen(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "tw"})

	_, err := dlq.Open(t.Context(), env.Bus.NC, "other")
	require.ErrorIs(t, err, dlq.ErrNoInstallation)
	require.Contains(t, err.Error(), "OTHER_DLQ")

	_, err = dlq.Open(t.Context(), env.Bus.NC, "not a prefix")
	require.Error(t, err)

	before, err := env.Bus.DLQ.Info(t.Context())
	require.NoError(t, err)
	_, err = dlq.Open(t.Context(), env.Bus.NC, "tw")
	require.NoError(t, err)
	after, err := env.Bus.DLQ.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, before.Config, after.Config, "Open changes nothing")
}
