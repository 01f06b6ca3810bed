package maintenance_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/maintenance"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The sweeper ends the calls on subjects no pool consumer filters (a dead
// letter and a NOT_FOUND answer) and leaves the calls a pool consumes
// alone. (The dispatcher's own test, with admission and GetResult, is
// internal/dispatch's TestCallsNoPoolConsumesAreDeadLetteredAndAnswered.)
func TestSweeperEndsCallsNoPoolConsumes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	b := s.b
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	_, err := b.Calls.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: b.Config.PoolConsumer("native"),
		FilterSubject: b.Subjects.ToolSubject(native, "builtin", "echo"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	covered, orphan := call("01J000000000000000000000S1", "default"), call("01J000000000000000000000S2", "default")
	orphan.Tool = "nosuchtool"
	s.store(t, covered)
	s.store(t, orphan)
	run(t, maintenance.NewSweeper(maintenance.SweeperConfig{Config: s.cfg, Every: 50 * time.Millisecond, Grace: time.Millisecond}))

	var resp *toolwirev1.ToolResponse
	require.Eventually(t, func() bool {
		resp = s.result(t, orphan)
		return resp != nil
	}, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, resp.GetError().GetType())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, resp.GetError().GetPartialSideEffects())
	require.Equal(t, "dlq", resp.GetMeta().GetSource())
	letters := s.deadLetters(t)
	require.Len(t, letters, 1)
	require.Equal(t, orphan.CallId, letters[0].GetCall().GetCallId())
	require.Equal(t, "sweeper:test", letters[0].Worker)
	require.Nil(t, s.result(t, covered), "a call a pool consumes was swept")
}

func TestCoverage(t *testing.T) {
	t.Parallel()
	c := maintenance.NewCoverage("tw.call.native.*.builtin.echo", "tw.call.http.>", "tw.call.mcp.acme.srv.tool", "tw.call.sandbox.acme.>")
	require.True(t, c.PerTenant(), "a filter naming a tenant")
	for subject, want := range map[string]bool{
		"tw.call.native.acme.builtin.echo":  true,
		"tw.call.native.acme.builtin.sleep": false,
		"tw.call.http.acme.local.fetch":     true,
		"tw.call.mcp.acme.srv.tool":         true,
		"tw.call.mcp.other.srv.tool":        false,
		"tw.call.sandbox.acme.local.grep":   true,
		"tw.call.sandbox.other.local.grep":  false,
	} {
		require.Equal(t, want, c.Covers(subject), subject)
	}
	require.False(t, maintenance.NewCoverage("tw.call.native.*.builtin.echo", "tw.call.http.>").PerTenant())
}
