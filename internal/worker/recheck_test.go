package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// rawCalls publishes calls straight onto JetStream, the way anyone with
// access to NATS can: no dispatcher, no admission.
type rawCalls struct {
	t *testing.T
	s *dispatchtest.Stack
}

// call returns a call of tool (served by the stack's native pool) that
// passes the worker's integrity checks, pinned to the tool's version.
func (r rawCalls) call(id, tool, args string) *toolwirev1.ToolCall {
	ent, err := r.s.Registry.Get(tool)
	require.NoError(r.t, err)
	return &toolwirev1.ToolCall{CallId: id, Tool: tool, SpecVersion: ent.Spec.Version, Arguments: []byte(args),
		Caller: &toolwirev1.Caller{Tenant: "default"}, Dispatcher: "d1", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
		Provider: "builtin", AcceptedAt: timestamppb.Now()}
}

func (r rawCalls) publishOn(subject string, c *toolwirev1.ToolCall) {
	data, err := proto.Marshal(c)
	require.NoError(r.t, err)
	_, err = r.s.Env.Bus.JS.Publish(r.t.Context(), subject, data)
	require.NoError(r.t, err)
}

func (r rawCalls) publish(c *toolwirev1.ToolCall) {
	r.publishOn(r.s.Env.Bus.Subjects.Call(c.Executor, c.Caller.Tenant, c.Provider, c.Tool), c)
}

// settled waits until the native pool has nothing pending or unacknowledged.
func settled(t *testing.T, s *dispatchtest.Stack) {
	t.Helper()
	cons, err := s.Env.Bus.Calls.Consumer(t.Context(), s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(t.Context())
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, 20*time.Second, 10*time.Millisecond)
}

type pathArgs struct {
	Path string `json:"path"`
}

// A worker validates a call's arguments against the input schema of the
// spec version it serves, as admission does: a call published around the
// dispatcher whose arguments break the schema is answered VALIDATION
// (naming the field), dead-lettered and never executed. Before, the tool
// ran: with a required field missing, an unknown field, and with the last
// of two "path" keys.
func TestWorkerValidatesArgumentsAgainstThePinnedSchema(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	var got atomic.Value
	read := tool.Must(tool.New("read", func(_ context.Context, in pathArgs) (string, error) {
		runs.Add(1)
		got.Store(in.Path)
		return in.Path, nil
	}))
	tight := tool.Must(tool.New("tight", func(_ context.Context, in pathArgs) (string, error) {
		runs.Add(1)
		return in.Path, nil
	}, tool.WithLimits(&toolwirev1.Limits{MaxArgsBytes: 64, MaxArgsDepth: 2})))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{read, tight}})
	raw := rawCalls{t, s}
	// The size and depth limits of the spec version, before any parsing.
	raw.publish(raw.call("01J00000000000000000000A06", "tight", `{"path":"`+strings.Repeat("x", 100)+`"}`))
	raw.publish(raw.call("01J00000000000000000000A07", "tight", `{"path":[[["deep"]]]}`))
	for id, want := range map[string]string{"01J00000000000000000000A06": "over the limit of 64", "01J00000000000000000000A07": "deeper than the limit of 2"} {
		r := waitResult(t, s, "default", "d1", id)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Error.GetType(), id)
		require.Contains(t, r.Error.Message, want, id)
	}
	waitDLQ(t, s, 2)

	cases := []struct {
		id, args, field, message string
	}{
		{"01J00000000000000000000A01", `{}`, "/path", "is required"},
		{"01J00000000000000000000A02", `{"path":"a","mode":"w"}`, "/mode", "is not allowed"},
		{"01J00000000000000000000A03", `{"path":"a","path":"/etc/passwd"}`, "/path", `duplicate key "path"`},
		{"01J00000000000000000000A04", `{"path":7}`, "/path", "string"},
	}
	for _, c := range cases {
		raw.publish(raw.call(c.id, "read", c.args))
	}
	dls := waitDLQ(t, s, uint64(2+len(cases)))
	byID := map[string]*toolwirev1.DeadLetter{}
	for _, dl := range dls {
		byID[dl.GetCall().GetCallId()] = dl
	}
	for _, c := range cases {
		r := waitResult(t, s, "default", "d1", c.id)
		require.False(t, r.Ok, c.args)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Error.Type, c.args)
		require.False(t, r.Error.Retryable, c.args)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Error.PartialSideEffects, c.args)
		require.Len(t, r.Error.Violations, 1, c.args)
		require.Equal(t, c.field, r.Error.Violations[0].Field, c.args)
		require.Contains(t, r.Error.Violations[0].Message, c.message, c.args)
		require.Contains(t, r.Error.Message, strings.TrimPrefix(c.field, "/"), c.args)
		dl := byID[c.id]
		require.NotNil(t, dl, "dead letter of %s", c.args)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, dl.LastError.GetType(), c.args)
	}
	settled(t, s)
	require.Zero(t, runs.Load(), "no call with invalid arguments reached the tool")

	// Valid arguments still run, published raw or admitted.
	raw.publish(raw.call("01J00000000000000000000A05", "read", `{"path":"ok"}`))
	r := waitResult(t, s, "default", "d1", "01J00000000000000000000A05")
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, int32(1), runs.Load())
	require.Equal(t, "ok", got.Load())
}

// A call's tenant must be a valid tenant name and the subject's tenant
// token must be exactly it: a tenant is never mapped to a token. Before,
// tenant "a.b" published on token a_b ran and was answered into tenant
// a_b's results, and a non-ASCII tenant ran too. Such calls are
// dead-lettered (VALIDATION, raw, under no tenant), terminated, never
// executed and never answered.
func TestWorkerRefusesTenantsThatAreNotExactTokens(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	read := tool.Must(tool.New("read", func(_ context.Context, in pathArgs) (string, error) {
		runs.Add(1)
		return in.Path, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{read}})
	raw := rawCalls{t, s}
	subj := s.Env.Bus.Subjects
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	cases := []struct{ id, tenant, token string }{
		{"01J00000000000000000000B01", "a.b", "a_b"},   // two tenants would share token a_b
		{"01J00000000000000000000B02", "zoë", "zoë"},   // not a tenant name, though a legal token
		{"01J00000000000000000000B03", "a b", "a_b"},   // white space
		{"01J00000000000000000000B04", "", "_"},        // no tenant at all
		{"01J00000000000000000000B05", "x:y", "x:y"},   // a KV key separator
		{"01J00000000000000000000B06", "abc", "abcde"}, // valid, but another token
	}
	for _, c := range cases {
		call := raw.call(c.id, "read", `{"path":"p"}`)
		call.Caller.Tenant = c.tenant
		raw.publishOn(subj.Call(native, c.token, "builtin", "read"), call)
	}
	dls := waitDLQ(t, s, uint64(len(cases)))
	for _, dl := range dls {
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, dl.LastError.GetType(), dl.Reason)
		// Kept raw, filed under no tenant: an invalid tenant, or a valid
		// one on another tenant's subject (dlq retry must not queue it for
		// either on the publisher's word).
		require.Nil(t, dl.Call)
		require.NotEmpty(t, dl.Raw)
		require.Contains(t, dl.Subject, ".call.native.")
		if strings.Contains(dl.Subject, ".abcde.") {
			require.Contains(t, dl.Reason, "disagrees")
		} else {
			require.Contains(t, dl.Reason, "not a valid tenant name")
		}
	}
	settled(t, s)
	require.Zero(t, runs.Load(), "no call with a mapped or smuggled tenant ran")
	for _, c := range cases {
		for _, tenant := range []string{c.token, c.tenant} {
			_, err := s.Env.Bus.Results.GetLastMsgForSubject(t.Context(), subj.Result(tenant, "d1", c.id))
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "no answer for tenant %q on token %q", c.tenant, c.token)
		}
	}
}

// A tool that requires approval never runs when its call reaches a worker
// without passing admission, whatever approval token the call carries: the
// worker answers CONFIRMATION_REQUIRED, dead-letters and terminates it.
func TestWorkerRefusesCallsNeedingApproval(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	wipe := tool.Must(tool.New("wipe", func(_ context.Context, in pathArgs) (string, error) {
		runs.Add(1)
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{wipe}})
	raw := rawCalls{t, s}
	tokens := map[string]string{"01J00000000000000000000C01": "", "01J00000000000000000000C02": "garbage"}
	for id, token := range tokens {
		call := raw.call(id, "wipe", `{"path":"/"}`)
		call.ApprovalToken = token
		raw.publish(call)
	}
	dls := waitDLQ(t, s, uint64(len(tokens)))
	for _, dl := range dls {
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, dl.LastError.GetType())
	}
	for id, token := range tokens {
		r := waitResult(t, s, "default", "d1", id)
		require.False(t, r.Ok, token)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, r.Error.Type, token)
		require.False(t, r.Error.Retryable, token)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Error.PartialSideEffects, token)
	}
	settled(t, s)
	require.Zero(t, runs.Load(), "a tool that requires approval ran")
}
