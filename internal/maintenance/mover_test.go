package maintenance_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/maintenance"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The mover puts a due retry back on CALLS only if it retries a stored
// call: a worker credential may write retry schedules, and a schedule of
// its own making must not queue a call admission never saw.
func TestMoverRequeuesOnlyRetriesOfStoredCalls(t *testing.T) {
	t.Parallel()
	s := setup(t)
	run(t, maintenance.NewMover(s.cfg))
	ctx := t.Context()
	b := s.b
	// A stored call, as admission stores it.
	call := call("01J000000000000000000000M1", "default")
	seq := s.store(t, call)

	forged := proto.CloneOf(call)
	forged.CallId, forged.Arguments = "01FORGEDFORGEDFORGEDFORGED", []byte(`{"text":"never admitted"}`)
	forged.Caller.Tenant = "other"
	retry := proto.CloneOf(call)
	retry.Attempt = 1
	for _, c := range []struct {
		name string
		call *toolwirev1.ToolCall
		of   string // RetryOfHeader
	}{
		{"no header", forged, ""},
		{"header naming another call", forged, strconv.FormatUint(seq, 10)},
		{"header naming no call", forged, "999999"},
		{"the retry of the stored call", retry, strconv.FormatUint(seq, 10)},
	} {
		data, err := proto.Marshal(c.call)
		require.NoError(t, err)
		m := &nats.Msg{Subject: b.Subjects.RetryDue(c.call.CallId, 1), Data: data, Header: nats.Header{}}
		if c.of != "" {
			m.Header.Set(bus.RetryOfHeader, c.of)
		}
		_, err = b.JS.PublishMsg(ctx, m)
		require.NoError(t, err, c.name)
	}
	// Wait until the mover has settled every due retry.
	settled(t, b.Retries, b.Config.MoverConsumer(), 4)

	// Only the genuine retry reached CALLS.
	cons, err := b.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var ids []string
	var attempts []int32
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
		if err != nil {
			break
		}
		c := &toolwirev1.ToolCall{}
		require.NoError(t, proto.Unmarshal(m.Data(), c))
		ids, attempts = append(ids, c.CallId), append(attempts, c.Attempt)
	}
	require.Equal(t, []string{call.CallId, call.CallId}, ids)
	require.Equal(t, []int32{0, 1}, attempts)
}

// The calls stream also stores replays (shadow subjects, which operators
// publish): a retry schedule naming one is dropped, never moved onto a
// live call subject.
func TestMoverNeverPromotesReplays(t *testing.T) {
	t.Parallel()
	s := setup(t)
	run(t, maintenance.NewMover(s.cfg))
	ctx := t.Context()
	b := s.b
	c := &toolwirev1.ToolCall{CallId: "01JZZZZZZZZZZZZZZZZZZZZZZZ", Tool: "echo", Provider: "builtin",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: "victim"},
		Arguments: []byte(`{"text":"never admitted"}`), Dispatcher: bus.ReplayDispatcher}
	data, err := proto.Marshal(c)
	require.NoError(t, err)
	ack, err := b.JS.Publish(ctx, b.Subjects.Shadow(c.Executor, "victim", "builtin", "echo"), data)
	require.NoError(t, err)
	c.Attempt = 1
	data, err = proto.Marshal(c)
	require.NoError(t, err)
	m := &nats.Msg{Subject: b.Subjects.RetryDue(c.CallId, 1), Data: data, Header: nats.Header{}}
	m.Header.Set(bus.RetryOfHeader, strconv.FormatUint(ack.Sequence, 10))
	_, err = b.JS.PublishMsg(ctx, m)
	require.NoError(t, err)
	settled(t, b.Retries, b.Config.MoverConsumer(), 1)
	_, err = bus.LastMsg(ctx, b.Calls, b.Subjects.Call(c.Executor, "victim", "builtin", "echo"))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "the replay became a live call")
}
