package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestOpenIsIdempotentAndLaysOutStreams(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "tw"})
	second := env.Open(t, "second") // a second Open over the same layout succeeds

	ctx := t.Context()
	info, err := second.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, "TW_CALLS", info.Config.Name)
	require.Equal(t, jetstream.LimitsPolicy, info.Config.Retention)
	require.Equal(t, jetstream.DiscardNew, info.Config.Discard)
	require.True(t, info.Config.AllowDirect)
	require.True(t, info.Config.DenyPurge)
	require.Equal(t, []string{"tw.call.>", "tw.shadow.>"}, info.Config.Subjects)

	cons, err := second.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, AckWait: 45 * time.Second})
	require.NoError(t, err)
	ci := cons.CachedInfo()
	require.Equal(t, "tw_pool_sandbox", ci.Name)
	require.Equal(t, jetstream.DeliverNewPolicy, ci.Config.DeliverPolicy)
	require.Equal(t, []string{"tw.call.sandbox.>"}, bus.ConsumerFilters(ci.Config))
	require.Equal(t, 45*time.Second, ci.Config.AckWait)

	_, err = env.Bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX})
	require.NoError(t, err, "ensuring a pool twice is harmless")
}

func TestResultIsWrittenOnce(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	subj := env.Bus.Subjects.Result("acme", "d1", "01CALL")
	_, err := env.Bus.JS.Publish(ctx, subj, []byte("first"), jetstream.WithExpectLastSequencePerSubject(0))
	require.NoError(t, err)
	_, err = env.Bus.JS.Publish(ctx, subj, []byte("second"), jetstream.WithExpectLastSequencePerSubject(0))
	require.True(t, bus.IsWrongLastSequence(err), "got %v", err)

	// Any replica finds a result by call id, whatever dispatcher routed it.
	msg, err := env.Bus.Results.GetLastMsgForSubject(ctx, env.Bus.Subjects.ResultAnyDispatcher("acme", "01CALL"))
	require.NoError(t, err)
	require.Equal(t, "first", string(msg.Data))
}

func TestToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"acme": "acme", "": "_", "a.b": "a_b", "a*": "a_", "x>": "x_", "a b\tc\n": "a_b_c_", "ünï": "ünï",
	} {
		require.Equal(t, want, bus.Token(in), "Token(%q)", in)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, bus.Config{}.WithDefaults().Validate())
	require.ErrorContains(t, bus.Config{Prefix: "a.b"}.WithDefaults().Validate(), "Prefix")
	require.ErrorContains(t, bus.Config{Replicas: 7}.WithDefaults().Validate(), "Replicas")
	_, err := bus.StartEmbedded(context.Background(), bus.EmbeddedConfig{})
	require.ErrorContains(t, err, "StoreDir")
}

// Two pools never consume the same tool's calls: both would run them.
func TestPoolsMustNotOverlap(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	s := env.Bus.Subjects
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	_, err := env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "echo")}})
	require.NoError(t, err)
	_, err = env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "b", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "echo")}})
	require.ErrorIs(t, err, bus.ErrPoolOverlap)
	_, err = env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "c", Type: native})
	require.ErrorIs(t, err, bus.ErrPoolOverlap, "a type-wide pool overlaps every tool pool of its type")
	_, err = env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "b", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "sleep")}})
	require.NoError(t, err)

	// A replica serving more tools widens its pool; none are dropped.
	cons, err := env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "a", Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "fail")}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{s.ToolSubject(native, "builtin", "echo"), s.ToolSubject(native, "builtin", "fail")},
		bus.ConsumerFilters(cons.CachedInfo().Config))
}

// A pool consumer written by an earlier version (a FilterSubjects list of
// one) is taken over: the same filter, now in FilterSubject, which the
// server serves on its faster single-filter path.
func TestPoolConsumerOfOneFilterUpgrades(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "tw"})
	ctx := t.Context()
	filter := env.Bus.Subjects.CallsOfType(toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP)
	_, err := env.Bus.Calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: env.Bus.Config.PoolConsumer("http"), FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy,
	})
	require.NoError(t, err)
	cons, err := env.Bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP})
	require.NoError(t, err)
	require.Equal(t, filter, cons.CachedInfo().Config.FilterSubject)
	require.Empty(t, cons.CachedInfo().Config.FilterSubjects)
}

// IsCall accepts exactly the call and shadow subjects Call and Shadow
// build, tokens escaped alike.
func TestIsCall(t *testing.T) {
	t.Parallel()
	s := bus.Subjects{Prefix: "tw"}
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	for _, c := range []struct{ tenant, provider, tool string }{
		{"acme", "builtin", "echo"}, {"", "p", "t"}, {"a.b", "x*y", "to>ol"}, {"ünï", "p q", "t"},
	} {
		require.True(t, s.IsCall(s.Call(native, c.tenant, c.provider, c.tool), native, c.tenant, c.provider, c.tool), c)
		require.True(t, s.IsCall(s.Shadow(native, c.tenant, c.provider, c.tool), native, c.tenant, c.provider, c.tool), c)
	}
	good := s.Call(native, "acme", "builtin", "echo")
	for _, bad := range []string{
		"", "tw", "tw.", good + ".x", good[:len(good)-1], "tx" + good[2:],
		s.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, "acme", "builtin", "echo"),
		s.Call(native, "acme2", "builtin", "echo"), s.Call(native, "acme", "builtin2", "echo"),
		s.Result("acme", "builtin", "echo"), "tw.dlq.native.acme.builtin.echo",
	} {
		require.False(t, s.IsCall(bad, native, "acme", "builtin", "echo"), bad)
	}
}

// An audit's or a replay's consumer left on the calls stream (its process
// died; the server removes it only after its inactivity threshold) is no
// pool: a pool over the same calls still starts.
func TestNonPoolConsumersNeverBlockAPool(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	s := env.Bus.Subjects
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	// What toolctl audit reads with: an ordered consumer over every call.
	audit, err := env.Bus.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.AllCalls(), s.AllShadow()}})
	require.NoError(t, err)
	_, err = audit.FetchNoWait(1) // the ordered consumer exists on the server once it reads
	require.NoError(t, err)
	require.NotNil(t, audit.CachedInfo())
	// An operator's own durable consumer (an export) is no pool either.
	_, err = env.Bus.Calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "export", FilterSubject: s.AllCalls(),
		AckPolicy: jetstream.AckNonePolicy})
	require.NoError(t, err)

	cons, err := env.Bus.EnsurePool(ctx, bus.PoolConfig{Type: native, Subjects: []string{s.ToolSubject(native, "builtin", "echo")}})
	require.NoError(t, err, "the audit's consumer must not count as an overlapping pool")
	require.True(t, env.Bus.Config.IsPoolConsumer(cons.CachedInfo()))
	require.False(t, env.Bus.Config.IsPoolConsumer(audit.CachedInfo()))
	_, err = env.Bus.EnsurePool(ctx, bus.PoolConfig{Name: "other", Type: native})
	require.ErrorIs(t, err, bus.ErrPoolOverlap, "pools still may not overlap each other")
}

// Unavailable tells errors worth waiting out at start-up (no server yet,
// no JetStream leader) from final ones.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("bus: connect: %w", nats.ErrNoServers), true},
		{fmt.Errorf("bus: stream X: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("bus: stream X: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), true},
		{fmt.Errorf("bus: stream X: %w", &jetstream.APIError{Code: 503, ErrorCode: 10118}), true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{nats.ErrNoResponders, true},
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("bus: connect: %w", nats.ErrAuthorization), false},
		{fmt.Errorf("worker: %w", bus.ErrPoolOverlap), false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, false},
	} {
		require.Equal(t, c.want, bus.Unavailable(c.err), "%v", c.err)
	}
}
