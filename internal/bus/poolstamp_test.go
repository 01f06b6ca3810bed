package bus_test

import (
	"maps"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A pool consumer carries the stamp of the settings it was declared with,
// by which another replica's declaration is told from a hand edit.
func TestPoolConsumerCarriesItsDeclaration(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	ensure := func(maxDeliver int) jetstream.ConsumerConfig {
		t.Helper()
		cons, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, MaxDeliver: maxDeliver})
		require.NoError(t, err)
		return cons.CachedInfo().Config
	}
	ours := ensure(5)
	require.Equal(t, bus.PoolStamp(ours), ours.Metadata[bus.PoolStampKey], "the stamp is of what the server holds")
	require.NotEmpty(t, ours.Metadata[bus.PoolByKey])
	require.Equal(t, bus.PoolCheck{}, bus.CheckPool(ours, ours))

	// Another replica's declaration: whole, left as it is.
	theirs := ensure(3)
	check := bus.CheckPool(theirs, ours)
	require.Empty(t, check.Edited)
	require.NotNil(t, check.Foreign)
	require.Equal(t, theirs.Metadata[bus.PoolStampKey], check.Foreign.Stamp)
	require.Equal(t, []string{"max_deliver: 3 → 5"}, check.Foreign.Differs)

	// A hand edit over it, stamp kept: put back.
	edited := theirs
	edited.MaxDeliver = 2
	cons, err := e.bus.Calls.UpdateConsumer(ctx, edited)
	require.NoError(t, err)
	check = bus.CheckPool(cons.CachedInfo().Config, ours)
	require.Nil(t, check.Foreign)
	require.Contains(t, check.Edited, "max_deliver: 2 → 5")

	// Our settings with the stamp removed: put back (the stamp with them).
	bare := ours
	bare.Metadata = maps.Clone(ours.Metadata)
	delete(bare.Metadata, bus.PoolStampKey)
	require.NotEmpty(t, bus.CheckPool(bare, ours).Edited)

	// A declared filter removed under our own declaration: put back.
	narrowed := ours
	narrowed.FilterSubject = e.bus.Subjects.CallsOfType(toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP)
	require.Equal(t, []string{"filter_subjects: missing " + ours.FilterSubject}, bus.CheckPool(narrowed, ours).Edited)
}
