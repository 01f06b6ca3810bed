package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// waitDLQ polls the dead-letter stream until it holds n records.
func waitDLQ(t *testing.T, s *dispatchtest.Stack, n uint64) []*toolwirev1.DeadLetter {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := s.Env.Bus.DLQ.Info(t.Context())
		require.NoError(t, err)
		if info.State.Msgs >= n {
			break
		}
		require.True(t, time.Now().Before(deadline), "DLQ has %d records, want %d", info.State.Msgs, n)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	var out []*toolwirev1.DeadLetter
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.Env.Bus.DLQ.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		dl := &toolwirev1.DeadLetter{}
		require.NoError(t, proto.Unmarshal(m.Data, dl))
		out = append(out, dl)
	}
	return out
}

func waitResult(t *testing.T, s *dispatchtest.Stack, tenant, dispatcher, callID string) *toolwirev1.ToolResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := s.Env.Bus.Results.GetLastMsgForSubject(t.Context(), s.Env.Bus.Subjects.Result(tenant, dispatcher, callID))
		if err == nil {
			r := &toolwirev1.ToolResponse{}
			require.NoError(t, proto.Unmarshal(m.Data, r))
			return r
		}
		require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		require.True(t, time.Now().Before(deadline), "no result for %s", callID)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// Bad input never crashes a worker and is never retried: undecodable calls
// are terminated and dead-lettered; decodable but invalid ones are also
// answered, so no caller hangs.
func TestBadCallsAreTerminatedAnsweredAndDeadLettered(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	b := s.Env.Bus
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	echo, err := s.Registry.Get("echo")
	require.NoError(t, err)

	// 1. Not protobuf at all.
	_, err = b.JS.Publish(ctx, b.Subjects.Call(native, "default", "builtin", "echo"), []byte("\xff\xff garbage"))
	require.NoError(t, err)

	valid := func(id string) *toolwirev1.ToolCall {
		return &toolwirev1.ToolCall{CallId: id, Tool: "echo", SpecVersion: echo.Spec.Version, Arguments: []byte(`{"text":"x"}`),
			Caller: &toolwirev1.Caller{Tenant: "default"}, Dispatcher: "d1", Executor: native, Provider: "builtin",
			AcceptedAt: timestamppb.Now()}
	}
	publish := func(subject string, c *toolwirev1.ToolCall) {
		data, err := proto.Marshal(c)
		require.NoError(t, err)
		_, err = b.JS.Publish(ctx, subject, data)
		require.NoError(t, err)
	}
	// 2. A subject that disagrees with the payload (tenant smuggling): dead-
	// lettered but not answered, since the answer would land in the
	// payload's tenant on a stranger's word.
	publish(b.Subjects.Call(native, "evil", "builtin", "echo"), valid("01J00000000000000000000001"))
	// 2b. A subject that names another tool of the same tenant: answered.
	publish(b.Subjects.Call(native, "default", "builtin", "sleep"), valid("01J00000000000000000000004"))
	// 3. An unknown spec version.
	c := valid("01J00000000000000000000002")
	c.SpecVersion = "0000"
	publish(b.Subjects.Call(native, "default", "builtin", "echo"), c)
	dls := waitDLQ(t, s, 4)
	reasons := map[string]string{}
	var raw []string // letters without a call, which dlq retry cannot queue
	for _, dl := range dls {
		if dl.GetCall() == nil {
			raw = append(raw, dl.Reason)
			continue
		}
		reasons[dl.GetCall().GetCallId()] = dl.Reason
	}
	require.Len(t, raw, 2, "the undecodable call, and the call filed under another tenant's subject")
	require.Contains(t, strings.Join(raw, "\n"), "undecodable")
	require.Contains(t, strings.Join(raw, "\n"), `"toolwire.call.native.evil.builtin.echo" disagrees`)
	require.Contains(t, reasons["01J00000000000000000000004"], "disagrees")
	require.Contains(t, reasons["01J00000000000000000000002"], "unknown spec version")

	r := waitResult(t, s, "default", "d1", "01J00000000000000000000004")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Error.Type)
	_, err = b.Results.GetLastMsgForSubject(ctx, b.Subjects.Result("default", "d1", "01J00000000000000000000001"))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "no answer written on a smuggled tenant's word")
	r = waitResult(t, s, "default", "d1", "01J00000000000000000000002")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Error.Type)

	// Nothing is left pending or redelivered, and the worker still works.
	cons, err := b.Calls.Consumer(ctx, b.Config.PoolConsumer("native"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, 20*time.Second, 10*time.Millisecond)
	resp, err := s.Dispatcher.Call(ctx, dispatchIdentity, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"ok"}`}, 10*time.Second)
	require.NoError(t, err)
	require.True(t, resp.Response.Ok)
}

// A call that waited in the queue past its schedule-to-start deadline is
// answered EXPIRED and never executed.
func TestExpiredCallsAreNeverExecuted(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	ctx := t.Context()
	w := s.StartWorker(t, builtin.Tools()...)
	require.NoError(t, w.Stop(ctx)) // registers the tools, serves nothing
	s.WaitTool(t, "echo")
	sub, err := s.Dispatcher.Submit(ctx, dispatchIdentity, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"late"}`,
		ScheduleToStart: durationpbNew(time.Millisecond)})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	s.StartWorker(t, builtin.Tools()...) // starts well after the 1ms deadline
	g, err := s.Dispatcher.GetResult(ctx, dispatchIdentity, sub.CallID, 15*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, g.Response.Error.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, g.Response.Error.PartialSideEffects)
}
