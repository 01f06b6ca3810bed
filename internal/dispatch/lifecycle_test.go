package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Stop waits for everything the dispatcher started, gives up when its
// context ends (saying so), and can be called again to wait for the rest;
// once it has returned nil no goroutine of the dispatcher is left.
// Not parallel: it compares the process's goroutines before and after.
func TestStopWaitsForWhatItStarted(t *testing.T) {
	s := dispatchtest.Start(t, dispatchtest.Options{})
	b := s.Env.Open(t, "lifecycle")
	ctx := t.Context()
	call := func(d *dispatch.Dispatcher) (*toolwirev1.CallResponse, error) {
		return d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	}
	// A first dispatcher on the connection makes what the connection
	// keeps for good (its request and publish-reply subscriptions).
	warm, err := dispatch.New(b, s.Registry, dispatch.Config{Name: "warm", MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, warm.Start(ctx))
	r, err := call(warm)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk())
	require.NoError(t, warm.Stop(ctx))
	before := goleak.IgnoreCurrent()

	d, err := dispatch.New(b, s.Registry, dispatch.Config{Name: "stopped", OrphanSweep: time.Second, PoolCheck: time.Second, MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, d.Start(ctx))
	r, err = call(d)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk())
	release := dispatch.HoldStop(d)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.Stop(cancelled), context.Canceled)
	_, err = call(d)
	require.ErrorIs(t, err, dispatch.ErrStopped, "stopped at the first Stop, even one that gave up")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, d.Stop(short), context.DeadlineExceeded, "a later Stop waits again")

	release()
	long, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, d.Stop(long))
	require.NoError(t, d.Stop(long), "idempotent")
	// The stack's in-process worker fetches all along, each fetch in a
	// goroutine of the library's that is new whenever the last one ended
	// (a call delivered, a fetch expired): not the dispatcher's, whose
	// long-lived readers consume, and nothing this test asks of it
	// fetches.
	goleak.VerifyNone(t, before, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*pullConsumer).fetch.func1"))
}

// Stop before Start (and twice) returns at once; the dispatcher is
// stopped.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	d, err := dispatch.New(s.Env.Bus, s.Registry, dispatch.Config{Name: "never-started"})
	require.NoError(t, err)
	require.NoError(t, d.Stop(t.Context()))
	require.NoError(t, d.Stop(t.Context()))
	_, err = d.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, time.Second)
	require.ErrorIs(t, err, dispatch.ErrStopped)
	// A stopped dispatcher does not start again (it used to return nil
	// with nothing running).
	require.ErrorIs(t, d.Start(t.Context()), dispatch.ErrStopped)
}
