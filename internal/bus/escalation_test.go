package bus_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// A worker credential cannot have the server deliver what it writes onto
// the dispatchers' dead-letter retry service (a push consumer on EVENTS
// whose deliver subject is that service) to queue a call admission never
// saw: it may create no consumer on EVENTS, and the service answers only
// requests whose replies go to an operator's (or a dispatcher's) inbox.
func TestWorkerCannotForgeRetriesThroughAPushConsumer(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	dnc, err := e.srv.Connect("dispatcher")
	require.NoError(t, err)
	t.Cleanup(dnc.Close)
	q, err := dlq.Open(t.Context(), dnc, "toolwire")
	require.NoError(t, err)
	sub, err := dlq.ServeRetries(dnc, q, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	nc, _ := e.dialRole(t, bus.RoleWorker)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s := e.bus.Subjects
	forged := &toolwirev1.DeadLetter{Call: &toolwirev1.ToolCall{CallId: "01JFORGEDFORGEDFORGEDFORGE", Tool: "echo", Provider: "p",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: "victim"},
		Arguments: []byte(`{"forged":true}`)}}
	data, err := proto.Marshal(forged)
	require.NoError(t, err)
	ack, err := js.Publish(t.Context(), s.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "victim", "p", "echo"), data)
	require.NoError(t, err)
	evSubj := s.Event("x", "y", "trigger")
	request := []byte(fmt.Sprintf(`{"seq":%d}`, ack.Sequence))
	require.NoError(t, nc.Publish(evSubj, request))
	cfg := func(stream, filter string) []byte {
		b, _ := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{
			"name": "evil", "deliver_subject": bus.DLQRetrySubject(e.bus.Config), "deliver_group": "dispatchers",
			"filter_subject": filter, "deliver_policy": "all", "ack_policy": "none"}})
		return b
	}
	// 1. No consumer on EVENTS: the request is refused (no answer).
	_, err = nc.Request("$JS.API.CONSUMER.CREATE."+e.bus.Config.EventsStream()+".evil."+evSubj,
		cfg(e.bus.Config.EventsStream(), evSubj), 2*time.Second)
	require.Error(t, err)

	// 2. Whatever reaches the service from a push consumer carries a
	// $JS.ACK reply and is refused: delivered as the server would.
	refused := &nats.Msg{Subject: bus.DLQRetrySubject(e.bus.Config), Reply: "$JS.ACK.EVENTS.evil.1.1.1.0.0", Data: request}
	require.NoError(t, dnc.PublishMsg(refused))
	require.NoError(t, dnc.Flush()) // the server has it before the request below
	// An operator's request for the same letter, sent after it, is served
	// in order: once it is answered, the one before was handled.
	onc, _ := e.dialRole(t, bus.RoleOperator)
	oq, err := dlq.Open(t.Context(), onc, "toolwire")
	require.NoError(t, err)
	id, err := oq.RequestRetry(t.Context(), ack.Sequence)
	require.NoError(t, err)
	info, err := e.bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs, "only the operator's retry (call %s) was queued", id)
}
