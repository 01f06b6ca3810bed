package bus_test

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

	// Its end set sooner by hand: paused to toolwire's horizon again, so it
	// does not lapse and let calls through until a guard notices.
	_, err = e.bus.JS.PauseConsumer(ctx, e.bus.Config.CallsStream(), e.bus.Config.PoolConsumer("native"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	cons, err = e.bus.EnsurePool(ctx, pool)
	require.NoError(t, err)
	info, err = cons.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.Greater(t, time.Until(*info.Config.PauseUntil), 24*time.Hour, "the hand-set end replaced")

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

// A name that cannot be a pool's is refused before it goes into a
// subject: one past the server's control line limit (about 4 KB) would
// make the server close the connection, and every part of the replica
// would fail with it. The refusal does not echo the name.
func TestPauseRefusesALongPoolName(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	_, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	long := strings.Repeat("a", 5000)

	_, err = e.bus.PausePool(ctx, long, bus.PoolPause{By: "acme/ops", At: time.Now()})
	require.ErrorIs(t, err, bus.ErrNoPool)
	require.Less(t, len(err.Error()), 200, "the name is not echoed")
	_, err = e.bus.ResumePool(ctx, long)
	require.ErrorIs(t, err, bus.ErrNoPool)
	require.Equal(t, nats.CONNECTED, e.bus.NC.Status())

	info, err := e.bus.PausePool(ctx, "native", bus.PoolPause{By: "acme/ops", At: time.Now()})
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.Equal(t, nats.CONNECTED, e.bus.NC.Status())
}

// staleWrite returns a hook that writes cfg over the pool's consumer,
// whole, after step (every time when always, else once), as another
// replica's EnsurePool that read the consumer before a pause or resume
// and writes it after.
func staleWrite(t *testing.T, b *bus.Bus, step string, always bool, cfg jetstream.ConsumerConfig) func(context.Context, string) {
	cfg.Metadata = maps.Clone(cfg.Metadata)
	maps.DeleteFunc(cfg.Metadata, func(k, _ string) bool { return strings.HasPrefix(k, "_nats.") })
	var done atomic.Bool
	return func(ctx context.Context, at string) {
		if at != step || (!always && !done.CompareAndSwap(false, true)) {
			return
		}
		_, err := b.Calls.CreateOrUpdateConsumer(ctx, cfg)
		require.NoError(t, err)
	}
}

// A replica's declaration of a pool's consumer (EnsurePool: read, then
// written whole) that straddles a pause drops the pause's record, and one
// that straddles a resume brings the record back: the pause or resume
// reads the consumer back and does it again, so that it ends in force,
// record and pause, and the next declaration keeps it.
func TestPauseAndResumeHoldThroughAStaleDeclaration(t *testing.T) {
	t.Parallel()
	for _, step := range []string{bus.PauseStepRecorded, bus.PauseStepMatched} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := startAuth(t, bus.Config{})
			ctx := t.Context()
			pool := bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}
			cons, err := e.bus.EnsurePool(ctx, pool)
			require.NoError(t, err)
			fresh := func() *jetstream.ConsumerInfo {
				t.Helper()
				info, err := cons.Info(ctx)
				require.NoError(t, err)
				return info
			}

			rec := bus.PoolPause{By: "acme/ops", At: time.Now().UTC().Truncate(time.Second), Reason: "incident"}
			bus.SetPauseHook(e.bus, staleWrite(t, e.bus, step, false, fresh().Config))
			_, err = e.bus.PausePool(ctx, "native", rec)
			require.NoError(t, err)
			for _, why := range []string{"after the pause", "after the next declaration"} {
				info := fresh()
				require.True(t, info.Paused, why)
				require.Equal(t, &rec, bus.RecordedPause(info.Config), why)
				_, err = e.bus.EnsurePool(ctx, pool)
				require.NoError(t, err)
			}

			bus.SetPauseHook(e.bus, staleWrite(t, e.bus, step, false, fresh().Config))
			_, err = e.bus.ResumePool(ctx, "native")
			require.NoError(t, err)
			for _, why := range []string{"after the resume", "after the next declaration"} {
				info := fresh()
				require.False(t, info.Paused, why)
				require.Nil(t, bus.RecordedPause(info.Config), why)
				_, err = e.bus.EnsurePool(ctx, pool)
				require.NoError(t, err)
			}
		})
	}
}

// A pause that other declarations undo every time is refused, after a
// bounded number of tries, rather than reported done.
func TestPauseUndoneEveryTimeIsRefused(t *testing.T) {
	t.Parallel()
	e := startAuth(t, bus.Config{})
	ctx := t.Context()
	cons, err := e.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	bus.SetPauseHook(e.bus, staleWrite(t, e.bus, bus.PauseStepMatched, true, cons.CachedInfo().Config))
	_, err = e.bus.PausePool(ctx, "native", bus.PoolPause{By: "acme/ops", At: time.Now()})
	require.ErrorIs(t, err, bus.ErrPauseOverlapped)
}
