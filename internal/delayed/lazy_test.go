package delayed_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/delayed"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
