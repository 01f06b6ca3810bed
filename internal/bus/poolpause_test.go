package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A pool paused through toolwire is paused on its consumer with the
// record of who paused it; declaring the consumer again keeps the pause;
// a pause made behind toolwire's back is a hand edit, and putting the
// declaration back removes it.
func TestPoolPauseIsKeptAndAHandPauseIsPutBack(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	pool := bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}
	cons, err := e.bus.EnsurePool(ctx, pool)
	require.NoError(t, err)
	declared := cons.CachedInfo().Config

	at := time.Now().UTC().Truncate(time.Second)
	info, err := e.bus.PausePool(ctx, "native", bus.PoolPause{By: "acme/ops", At: at, Reason: "upstream incident"})
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.Equal(t, &bus.PoolPause{By: "acme/ops", At: at, Reason: "upstream incident"}, bus.RecordedPause(info.Config))
	require.Equal(t, bus.PoolCheck{}, bus.CheckPool(info.Config, declared), "a recorded pause is no edit")

	// A replica (or a starting worker) declares the consumer again: still paused.
	cons, err = e.bus.EnsurePool(ctx, pool)
	require.NoError(t, err)
	info, err = cons.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Paused, "EnsurePool must keep a recorded pause")
	require.Equal(t, "acme/ops", bus.RecordedPause(info.Config).By)

	// Resumed by hand (nats consumer resume): an edit; put back = paused again.
	_, err = e.bus.JS.ResumeConsumer(ctx, e.bus.Config.CallsStream(), e.bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	info, err = cons.Info(ctx)
	require.NoError(t, err)
	require.False(t, info.Paused)
	require.Len(t, bus.CheckPool(info.Config, declared).Edited, 1)
	require.Contains(t, bus.CheckPool(info.Config, declared).Edited[0], "resumed outside toolwire (paused by acme/ops)")
	cons, err = e.bus.EnsurePool(ctx, pool)
	require.NoError(t, err)
	require.True(t, cons.CachedInfo().Paused)

	// Resumed through toolwire: no record, not paused.
	info, err = e.bus.ResumePool(ctx, "native")
	require.NoError(t, err)
	require.False(t, info.Paused)
	require.Nil(t, bus.RecordedPause(info.Config))
	require.Equal(t, bus.PoolCheck{}, bus.CheckPool(info.Config, declared))

	// Paused by hand (nats consumer pause): an edit, flagged; put back = resumed.
	_, err = e.bus.JS.PauseConsumer(ctx, e.bus.Config.CallsStream(), e.bus.Config.PoolConsumer("native"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	info, err = cons.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Paused)
	edited := bus.CheckPool(info.Config, declared).Edited
	require.Len(t, edited, 1)
	require.Contains(t, edited[0], "paused outside toolwire")
	cons, err = e.bus.EnsurePool(ctx, pool)
	require.NoError(t, err)
	require.False(t, cons.CachedInfo().Paused, "an unrecorded pause is put back")

	_, err = e.bus.PausePool(ctx, "nosuch", bus.PoolPause{By: "acme/ops", At: at})
	require.ErrorIs(t, err, bus.ErrNoPool)
}
