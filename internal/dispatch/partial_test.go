package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Partial output is believed as every event is: a PROGRESS event with
// partial output that the worker credential stores for a running call —
// unsigned, or signed with a key nobody enrolled — is never streamed by
// Watch; the real worker's chunks are, in order, before the result.
func TestForgedPartialOutputIsNeverStreamed(t *testing.T) {
	t.Parallel()
	forgedIn := make(chan struct{})
	s, callID := startPausedStream(t, forgedIn)
	ctx, id := t.Context(), identity.Default

	forger := s.conn(t, bus.RoleWorker)
	fjs, err := jetstream.New(forger)
	require.NoError(t, err)
	subject := s.env.Bus.Subjects.Event(id.Tenant, s.d.Config().Name, callID)
	stranger, err := signing.NewKey()
	require.NoError(t, err)
	forged := func(seq uint32) []byte {
		b, err := proto.Marshal(&toolwirev1.CallEvent{CallId: callID, Tool: "stream", Attempt: 1, Worker: "real-worker",
			Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Partial: []*toolwirev1.Content{tool.Text("forged")}, PartialSeq: seq})
		require.NoError(t, err)
		return b
	}
	for _, m := range []*nats.Msg{
		{Subject: subject, Data: forged(2)},
		stranger.SignedMsg(subject, signing.KindEvent, callID, 1, forged(2), nil),
		{Subject: subject, Data: forged(3), Header: s.key.Sign(nil, signing.KindEvent, callID, 1, forged(2))}, // another event's signature
	} {
		_, err := fjs.PublishMsg(ctx, m) // stored: the worker credential may publish events
		require.NoError(t, err)
	}
	close(forgedIn)

	var partial []string
	err = s.d.Watch(ctx, id, callID, func(ev *toolwirev1.CallEvent) error {
		for _, c := range ev.GetPartial() {
			partial = append(partial, c.GetText().GetText())
		}
		if ev.GetType() == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED {
			require.Equal(t, []string{"real 1", "real 2"}, partial, "the real chunks, in order, before the result")
			require.NotContains(t, ev.GetResponse().String(), "forged")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"real 1", "real 2"}, partial)
}

// A chunk of partial output is streamed once: the worker credential
// storing a signed chunk again (a replay: its bytes and signature as the
// worker published them) does not make Watch stream it twice, nor does a
// chunk of an earlier attempt, or an earlier number, come after.
func TestReplayedPartialOutputIsStreamedOnce(t *testing.T) {
	t.Parallel()
	replayed := make(chan struct{})
	s, callID := startPausedStream(t, replayed)
	ctx, id := t.Context(), identity.Default
	subject := s.env.Bus.Subjects.Event(id.Tenant, s.d.Config().Name, callID)
	// The chunk is looked for among all the call's events, not as the
	// last one: the dispatcher's ACCEPTED record is a core publish to
	// another stream than the call's, and on a loaded host it can be
	// stored after the worker's first events.
	var first *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		msgs, err := bus.MsgsBetweenFromLeader(ctx, s.env.Bus.JS, s.env.Bus.Events, subject, 1, 0)
		if err != nil {
			return false
		}
		for _, m := range msgs {
			ev := &toolwirev1.CallEvent{}
			if proto.Unmarshal(m.Data, ev) == nil && ev.GetPartialSeq() == 1 {
				first = m
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond, "the first chunk is stored")

	fjs, err := jetstream.New(s.conn(t, bus.RoleWorker))
	require.NoError(t, err)
	_, err = fjs.PublishMsg(ctx, &nats.Msg{Subject: first.Subject, Header: first.Header, Data: first.Data})
	require.NoError(t, err)
	close(replayed)

	var partial []string
	err = s.d.Watch(ctx, id, callID, func(ev *toolwirev1.CallEvent) error {
		for _, c := range ev.GetPartial() {
			partial = append(partial, c.GetText().GetText())
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"real 1", "real 2"}, partial, "the replayed chunk is not streamed again")
}

// startPausedStream starts a signed stack with a tool "stream" and
// submits a call of it: the tool sends the partial chunk "real 1", then
// waits for resume to close before it sends "real 2" and returns "done".
// It returns once the first chunk is sent, with the call's id.
func startPausedStream(t *testing.T, resume <-chan struct{}) (*signedStack, string) {
	t.Helper()
	sentFirst := make(chan string, 1)
	stream := tool.Must(tool.New("stream", func(ctx context.Context, _ struct{}) (string, error) {
		if err := tool.PartialText(ctx, "real 1"); err != nil {
			return "", err
		}
		ci, _ := tool.CallInfoFrom(ctx)
		sentFirst <- ci.CallID
		select {
		case <-resume:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if err := tool.PartialText(ctx, "real 2"); err != nil {
			return "", err
		}
		return "done", nil
	}, tool.ReadOnly()))
	s := startSigned(t, stream)
	sub, err := s.d.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stream"})
	require.NoError(t, err)
	select {
	case callID := <-sentFirst:
		require.Equal(t, sub.CallID, callID)
		return s, callID
	case <-time.After(time.Minute):
		t.Fatal("the tool never ran")
		return nil, ""
	}
}
