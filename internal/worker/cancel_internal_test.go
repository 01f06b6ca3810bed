package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
)

// A tombstone seen before a call registers is found at registration; one
// arriving after cancels the registered call.
func TestCancelsRegisterAndWatchMeet(t *testing.T) {
	t.Parallel()
	var c cancels
	c.live(time.Now(), 0)
	c.cancel("acme.early", bus.Tombstone{By: "bot"})
	_, cancel := context.WithCancelCause(context.Background())
	seen, reg := c.register("acme.early", cancel)
	require.NotNil(t, seen)
	require.Equal(t, "bot", seen.By)
	c.unregister(reg)

	ctx, cancel := context.WithCancelCause(context.Background())
	seen, reg = c.register("acme.late", cancel)
	defer c.unregister(reg)
	require.Nil(t, seen)
	require.True(t, c.cancel("acme.late", bus.Tombstone{By: "ops", Reason: "stop"}))
	var ce *CancelledError
	require.True(t, errors.As(context.Cause(ctx), &ce))
	require.Equal(t, "ops", ce.By)
}

// Executions sharing a key (a redelivery racing an abandoned execution)
// are all cancelled, and each unregisters only itself, in any order.
func TestCancelsSharedKey(t *testing.T) {
	t.Parallel()
	var c cancels
	c.live(time.Now(), 0)
	ctxs := make([]context.Context, 3)
	regs := make([]*registration, 3)
	for i := range ctxs {
		var cancel context.CancelCauseFunc
		ctxs[i], cancel = context.WithCancelCause(context.Background())
		_, regs[i] = c.register("acme.same", cancel)
	}
	c.unregister(regs[1]) // the middle of the list
	require.True(t, c.cancel("acme.same", bus.Tombstone{By: "ops"}))
	require.Error(t, context.Cause(ctxs[0]))
	require.NoError(t, context.Cause(ctxs[1]), "unregistered before the cancel")
	require.Error(t, context.Cause(ctxs[2]))
	c.unregister(regs[2]) // the head
	c.unregister(regs[0])
	c.unregister(regs[0]) // twice: no effect
	require.Empty(t, c.fns)
	require.False(t, c.cancel("acme.same", bus.Tombstone{By: "ops"}))
}

// Only calls admitted after the watcher went live (on this connection)
// may skip the bucket lookup.
func TestCancelsLookupWindow(t *testing.T) {
	t.Parallel()
	var c cancels
	now := time.Now()
	require.True(t, c.lookupNeeded(now, now, 0), "before the watcher is live")
	c.live(now, 0)
	require.True(t, c.lookupNeeded(now.Add(-time.Minute), now, 0), "admitted before the watcher went live")
	require.True(t, c.lookupNeeded(now.Add(ClockSkew/2), now, 0), "within the clock-skew margin")
	later := now.Add(time.Minute)
	require.False(t, c.lookupNeeded(now.Add(30*time.Second), later, 0), "admitted while the watcher was live")
	require.True(t, c.lookupNeeded(now.Add(30*time.Second), later, 1), "a reconnect may have lost tombstones")
	require.False(t, c.lookupNeeded(later.Add(2*ClockSkew), later.Add(3*ClockSkew), 1))
	require.True(t, c.lookupNeeded(now.Add(2*ClockSkew), now.Add(2*seenFor), 1), "older than the seen window")
}

// A redelivery of a call whose earlier delivery is in flight in this
// worker sees it (and leaves the call to it, gate), unless the watchdog
// abandoned that delivery's execution: an abandoned one never settles.
// The grace period's end closes stopping; a caller's cancel does not.
func TestCancelsLiveOtherAndStopping(t *testing.T) {
	t.Parallel()
	var c cancels
	noop := func(error) {}
	_, first := c.register("acme.call", noop)
	_, other := c.register("acme.other", noop)
	defer c.unregister(other)
	_, again := c.register("acme.call", noop)
	defer c.unregister(again)
	require.True(t, c.liveOther(again), "the first delivery is in flight")
	require.True(t, c.liveOther(first), "and sees the redelivery")
	require.False(t, c.liveOther(other))

	ex := &execution{}
	first.begin(ex)
	require.True(t, c.liveOther(again), "executing")
	ex.state.Store(execAbandoned)
	require.False(t, c.liveOther(again), "abandoned by the watchdog")
	c.unregister(first)
	require.False(t, c.liveOther(again))

	c.cancel("acme.call", bus.Tombstone{By: "bot"})
	select {
	case <-c.stopping():
		t.Fatal("a caller's cancel closed stopping")
	default:
	}
	c.cancelAll(errors.New("stop"))
	c.cancelAll(errors.New("stop again")) // closes once
	<-c.stopping()
}
