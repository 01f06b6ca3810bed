package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// bundle is a real JetStream with the toolwire layout and the
// configuration the services run with.
type bundle struct {
	b   *bus.Bus
	cfg maintenance.Config
}

func setup(t *testing.T) bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	// What the tests store as a dispatcher stores it is signed with the
	// bus's key, enrolled as a dispatcher's (internal/signing).
	if err := registry.EnrolDispatcher(t.Context(), env.Bus.Registry, env.Bus.Signer.Public(), "test"); err != nil {
		t.Fatalf("enrol: %v", err)
	}
	return bundle{b: env.Bus, cfg: maintenance.Config{Bus: env.Bus, Name: "test"}}
}

// answer stores resp as c's result, signed as a dispatcher's or a
// worker's.
func (s bundle) answer(t *testing.T, c *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) {
	t.Helper()
	resp.Tool = c.Tool // a result names its call's tool
	data, err := proto.Marshal(resp)
	require.NoError(t, err)
	subject := s.b.Subjects.Result(c.Caller.Tenant, c.Dispatcher, c.CallId)
	_, err = s.b.JS.PublishMsg(t.Context(), s.b.Signer.SignedMsg(subject, signing.KindResult, c.CallId, resp.GetMeta().GetAttempt(), data, nil))
	require.NoError(t, err)
}

// run starts s and stops it when the test ends.
func run(t *testing.T, s startstop.Service) {
	t.Helper()
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
}

// call returns a call of tool echo for tenant, as admission stores it.
func call(id, tenant string) *toolwirev1.ToolCall {
	return &toolwirev1.ToolCall{CallId: id, Tool: "echo", Provider: "builtin", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
		Caller: &toolwirev1.Caller{Tenant: tenant, Session: "s1"}, Dispatcher: "d1", Arguments: []byte(`{"text":"x"}`),
		AcceptedAt: timestamppb.Now()}
}

// store publishes c on its live call subject and returns its stream
// sequence.
func (s bundle) store(t *testing.T, c *toolwirev1.ToolCall) uint64 {
	t.Helper()
	data, err := proto.Marshal(c)
	require.NoError(t, err)
	ack, err := s.b.JS.Publish(t.Context(), s.b.Subjects.Call(c.Executor, c.Caller.Tenant, c.Provider, c.Tool), data)
	require.NoError(t, err)
	return ack.Sequence
}

// settled waits until the durable consumer name of stream has settled
// every message it was given, at least n of them.
func settled(t *testing.T, stream jetstream.Stream, name string, n uint64) {
	t.Helper()
	cons, err := stream.Consumer(t.Context(), name)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(t.Context())
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Consumer >= n
	}, 20*time.Second, 10*time.Millisecond)
}

// deadLetters returns the records the DLQ stream holds.
func (s bundle) deadLetters(t *testing.T) []*toolwirev1.DeadLetter {
	t.Helper()
	info, err := s.b.DLQ.Info(t.Context())
	require.NoError(t, err)
	var out []*toolwirev1.DeadLetter
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.b.DLQ.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		dl := &toolwirev1.DeadLetter{}
		require.NoError(t, proto.Unmarshal(m.Data, dl))
		out = append(out, dl)
	}
	return out
}

// result returns the response stored for c, or nil.
func (s bundle) result(t *testing.T, c *toolwirev1.ToolCall) *toolwirev1.ToolResponse {
	t.Helper()
	m, err := s.b.Results.GetLastMsgForSubject(t.Context(), s.b.Subjects.Result(c.Caller.Tenant, c.Dispatcher, c.CallId))
	if err != nil {
		require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		return nil
	}
	resp := &toolwirev1.ToolResponse{}
	require.NoError(t, proto.Unmarshal(m.Data, resp))
	return resp
}
