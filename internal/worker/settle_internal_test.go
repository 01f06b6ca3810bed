package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// Steps of calls without context values share one settle context whose
// deadline is at least settleTimeout away, replaced once it has been
// handed out for settleRenew; a context with values gets its own.
func TestSettleContext(t *testing.T) {
	t.Parallel()
	var w Worker
	a, cancelA := w.settleContext(context.Background())
	defer cancelA()
	b, cancelB := w.settleContext(context.Background())
	defer cancelB()
	require.Equal(t, a, b, "shared")
	dl, ok := a.Deadline()
	require.True(t, ok)
	require.GreaterOrEqual(t, time.Until(dl), settleTimeout-time.Second)

	old := w.settleShared.Load()
	w.settleShared.Store(&sharedSettle{ctx: old.ctx, cancel: old.cancel, renew: time.Now().Add(-time.Millisecond)})
	c, cancelC := w.settleContext(context.Background())
	defer cancelC()
	require.NotEqual(t, a, c, "renewed once handed out for settleRenew")
	require.NoError(t, a.Err(), "a replaced context is not cancelled: calls may still use it")

	v := context.WithValue(context.Background(), ctxKey{}, "span")
	d, cancelD := w.settleContext(v)
	defer cancelD()
	require.NotEqual(t, c, d)
	require.Equal(t, "span", d.Value(ctxKey{}), "keeps the caller's values")
	dl, ok = d.Deadline()
	require.True(t, ok)
	require.LessOrEqual(t, time.Until(dl), settleTimeout)
	w.settleShared.Load().cancel()
	old.cancel()
}
