package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
)

// The reaper's and the mover's consumers are named by the prefix, one per
// installation however many replicas ensure them, and deliver a message
// for as long as it is not handled.
func TestSharedConsumersAreOnePerInstallation(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{Prefix: "tw"})
	second := env.Open(t, "second")
	ctx := t.Context()
	for _, b := range []*bus.Bus{env.Bus, second} {
		reaper, err := b.EnsureReaper(ctx)
		require.NoError(t, err)
		require.Equal(t, "tw_reaper", reaper.CachedInfo().Name)
		require.Equal(t, jetstream.DeliverAllPolicy, reaper.CachedInfo().Config.DeliverPolicy)
		require.Equal(t, -1, reaper.CachedInfo().Config.MaxDeliver, "an advisory is never dropped")
		mover, err := b.EnsureMover(ctx)
		require.NoError(t, err)
		require.Equal(t, "tw_retry_mover", mover.CachedInfo().Name)
		require.Equal(t, []string{b.Subjects.DueRetries()}, bus.ConsumerFilters(mover.CachedInfo().Config))
		require.Equal(t, -1, mover.CachedInfo().Config.MaxDeliver, "a due retry is never dropped")
	}
	info, err := env.Bus.Advisories.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, info.State.Consumers)
}
