package delayed_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/delayed"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

func TestQueue(t *testing.T) {
	t.Parallel()
	q := delayed.NewQueue(20 * time.Millisecond)
	require.NoError(t, q.Start(t.Context()))
	defer func() { _ = q.Stop(context.Background()) }()
	var fired, stopped, flushed atomic.Int32
	r1 := q.Add(func() { fired.Add(1) })
	r2 := q.Add(func() { stopped.Add(1) })
	r3 := q.Add(func() { flushed.Add(1) })
	r2.Stop()
	r3.Flush()
	r3.Flush()
	require.Eventually(t, func() bool { return fired.Load() == 1 }, 5*time.Second, time.Millisecond)
	r1.Flush() // already fired: nothing more
	require.EqualValues(t, 1, fired.Load())
	require.EqualValues(t, 0, stopped.Load())
	require.EqualValues(t, 1, flushed.Load())
}

func TestStopDropsPending(t *testing.T) {
	t.Parallel()
	q := delayed.NewQueue(time.Hour)
	require.NoError(t, q.Start(t.Context()))
	var fired atomic.Int32
	r := q.Add(func() { fired.Add(1) })
	_ = q.Stop(t.Context())
	_ = q.Stop(t.Context())
	require.Zero(t, fired.Load())
	r.Flush() // a record can still be flushed by its owner
	require.EqualValues(t, 1, fired.Load())
}

// The records due at one tick are published at once, not one after
// another: each publish here waits for all of them to have started (or a
// while, should a tick fall between them), and publishes overlapped.
func TestDueRecordsPublishTogether(t *testing.T) {
	t.Parallel()
	q := delayed.NewQueue(200 * time.Millisecond)
	require.NoError(t, q.Start(t.Context()))
	defer func() { _ = q.Stop(context.Background()) }()
	const n = 8
	var started, inFlight, most, done atomic.Int32
	all := make(chan struct{})
	for range n {
		q.Add(func() {
			now := inFlight.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			if started.Add(1) == n {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(2 * time.Second):
			}
			inFlight.Add(-1)
			done.Add(1)
		})
	}
	require.Eventually(t, func() bool { return done.Load() == n }, time.Minute, time.Millisecond)
	require.GreaterOrEqual(t, most.Load(), int32(2), "published one after another")
}
