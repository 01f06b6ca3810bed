package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A pool paused on one replica takes no calls on any: its worker is
// delivered nothing (a call queued before the pause waits), every
// replica refuses new calls OVERLOADED naming the pause, the record
// names who paused it; resumed on another replica, the queued call runs.
// Only an installation admin may pause or resume.
func TestPausedPoolTakesNoCallsOnAnyReplica(t *testing.T) {
	t.Parallel()
	hold, started, release := releasedHold(4)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{hold, builtin.Tools()[0]}, Concurrency: 1})
	second := s.StartDispatcher(t, dispatch.Config{})
	ctx := t.Context()
	admin := identity.Identity{Tenant: "ops", Agent: "alice", Scopes: []string{identity.AdminScope, identity.InstallationScope}}

	// Neither a tenant's admin nor a reader may pause a pool.
	for _, id := range []identity.Identity{
		{Tenant: "acme", Agent: "tenant-admin", Scopes: []string{identity.AdminScope}},
		{Tenant: "ops", Agent: "reader", Scopes: []string{"read", identity.InstallationScope}},
	} {
		_, err := s.Dispatcher.PausePool(ctx, id, "native", "")
		require.ErrorIs(t, err, dispatch.ErrPauseScope)
		require.ErrorIs(t, s.Dispatcher.ResumePool(ctx, id, "native"), dispatch.ErrPauseScope)
	}
	_, err := s.Dispatcher.PausePool(ctx, admin, "nosuch", "")
	require.ErrorIs(t, err, dispatch.ErrNoPool)
	// A name that cannot be a pool's is refused before it reaches a
	// subject (one past the server's control line limit would close the
	// replica's connection), and is not echoed.
	long := strings.Repeat("a", 5000)
	_, err = s.Dispatcher.PausePool(ctx, admin, long, "")
	require.ErrorIs(t, err, dispatch.ErrNoPool)
	require.NotContains(t, err.Error(), long[:65])
	require.ErrorIs(t, s.Dispatcher.ResumePool(ctx, admin, long), dispatch.ErrNoPool)
	require.Equal(t, nats.CONNECTED, s.Env.Bus.NC.Status())

	// One call runs (the pool's only slot), one waits in the queue.
	running, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	require.Nil(t, running.Rejected)
	<-started
	queued, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"after the resume"}`})
	require.NoError(t, err)
	require.Nil(t, queued.Rejected)

	rec, err := s.Dispatcher.PausePool(ctx, admin, "native", "upstream incident")
	require.NoError(t, err)
	require.Equal(t, "ops/alice", rec.By)

	// The worker's slot frees and it asks for more; the queued call is
	// not delivered.
	close(release)
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, running.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	cons, err := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	requireEventually(t, func() bool {
		ci, err := cons.Info(ctx)
		require.NoError(t, err)
		require.True(t, ci.Paused)
		return ci.NumWaiting > 0 && ci.NumAckPending == 0
	}, "the worker waits on the paused pool")
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, ci.NumPending, "the queued call stays queued")
	g, err = s.Dispatcher.GetResult(ctx, identity.Default, queued.CallID, 0)
	require.NoError(t, err)
	require.NotEqual(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)

	// New calls are refused on this replica at once, and on the other
	// within its refresh; both show who paused the pool.
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	require.NoError(t, err)
	requireOverloaded(t, sub.Rejected, "pool native is paused by an administrator")
	requireEventually(t, func() bool {
		sub, err := second.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
		require.NoError(t, err)
		return sub.Rejected != nil
	}, "the second replica refuses")
	sub, err = second.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	require.NoError(t, err)
	requireOverloaded(t, sub.Rejected, "pool native is paused by an administrator")
	for _, d := range []*dispatch.Dispatcher{s.Dispatcher, second} {
		p := pausedPool(t, d)
		require.True(t, p.Paused)
		require.Equal(t, &bus.PoolPause{By: "ops/alice", At: rec.At, Reason: "upstream incident"}, p.Record)
		require.Empty(t, p.Drift)
	}

	// Resumed on the other replica: the queued call runs, new calls are admitted.
	require.NoError(t, second.ResumePool(ctx, admin, "native"))
	g, err = s.Dispatcher.GetResult(ctx, identity.Default, queued.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.True(t, g.Response.Ok)
	c, err := second.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, c.Response.Ok, "%v", c.Response.GetError())
}

// A pool paused behind toolwire's back (the NATS API with the operator
// credential) is shown as such and refused naming it; with no worker to
// put it back, it stays so.
func TestPauseOutsideToolwireIsFlagged(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	require.NoError(t, s.Worker.Stop(ctx)) // its guard would put the consumer back
	_, err := s.Env.Bus.JS.PauseConsumer(ctx, s.Env.Bus.Config.CallsStream(), s.Env.Bus.Config.PoolConsumer("native"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	requireEventually(t, func() bool { return pausedPool(t, s.Dispatcher).Paused }, "the view reads the pause")
	p := pausedPool(t, s.Dispatcher)
	require.Nil(t, p.Record)
	require.Contains(t, p.Drift, "paused outside toolwire")
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	require.NoError(t, err)
	requireOverloaded(t, sub.Rejected, "pool native is paused outside toolwire")
}

// A pool paused behind toolwire's back is put back by its worker's
// guard: resumed, as no one recorded the pause; calls run again.
func TestPauseOutsideToolwireIsPutBack(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	_, err := s.Env.Bus.JS.PauseConsumer(ctx, s.Env.Bus.Config.CallsStream(), s.Env.Bus.Config.PoolConsumer("native"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	cons, err := s.Env.Bus.Calls.Consumer(ctx, s.Env.Bus.Config.PoolConsumer("native"))
	require.NoError(t, err)
	requireEventually(t, func() bool {
		ci, err := cons.Info(ctx)
		require.NoError(t, err)
		return !ci.Paused
	}, "the worker resumes a pause no one recorded")
	requireEventually(t, func() bool { return !pausedPool(t, s.Dispatcher).Paused }, "the view reads the resume")
	c, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, c.Response.Ok, "%v", c.Response.GetError())
}

// pausedPool is the native pool's pause as d's view last read it.
func pausedPool(t *testing.T, d *dispatch.Dispatcher) poolPause {
	t.Helper()
	for _, p := range d.Pools() {
		if p.Pool == "native" && p.Pause != nil {
			return poolPause(*p.Pause)
		}
	}
	t.Fatal("no native pool read")
	return poolPause{}
}

type poolPause struct {
	Paused bool
	Record *bus.PoolPause
	Drift  string
}
