package limits_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/limits"
)

// A cap of 2: two calls hold slots, the third is refused, a release by
// another replica frees one, and releasing twice or releasing an unknown
// call is harmless.
func TestAcquireCapReleaseByAnyReplica(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, b := e.inProcess(t, limits.Config{}), e.inProcess(t, limits.Config{})
	ctx, k, now := t.Context(), key(t, "tool"), time.Now()
	lease := time.Minute
	for _, id := range []string{"c1", "c2"} {
		ok, err := a.Acquire(ctx, k, 2, id, lease, now)
		require.NoError(t, err)
		require.True(t, ok, id)
	}
	ok, err := a.Acquire(ctx, k, 2, "c3", lease, now)
	require.NoError(t, err)
	require.False(t, ok)
	n, err := b.InFlight(ctx, k, now)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// Acquire is idempotent per call id: a retry takes no second slot.
	ok, err = b.Acquire(ctx, k, 2, "c1", lease, now)
	require.NoError(t, err)
	require.True(t, ok)
	n, err = b.InFlight(ctx, k, now)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// Replica b sees c1's terminal result and releases it.
	require.NoError(t, b.Release(ctx, k, "c1"))
	require.NoError(t, b.Release(ctx, k, "c1"))
	require.NoError(t, a.Release(ctx, k, "never-acquired"))
	ok, err = a.Acquire(ctx, k, 2, "c3", lease, now)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.Acquire(ctx, k, 2, "c4", lease, now)
	require.NoError(t, err)
	require.False(t, ok)
}

// A holder that stops renewing loses its slot when its lease ends, not
// before; a holder that renews keeps it; Renew tells a holder whose slot
// was taken.
func TestAcquireLeaseEndsAndRenew(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k, now := t.Context(), key(t, "v"), time.Now()
	lease := 10 * time.Second
	ok, err := s.Acquire(ctx, k, 1, "dead", lease, now)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.Acquire(ctx, k, 1, "next", lease, now.Add(lease-time.Nanosecond))
	require.NoError(t, err)
	require.False(t, ok, "taken before the lease ended")
	ok, err = s.Acquire(ctx, k, 1, "next", lease, now.Add(lease))
	require.NoError(t, err)
	require.True(t, ok, "free once the lease ended")
	held, err := s.Renew(ctx, k, "dead", lease, now.Add(lease))
	require.NoError(t, err)
	require.False(t, held, "the dead holder's slot is gone")

	// "next" renews every lease/2 and keeps the slot for ever.
	at := now.Add(lease)
	for range 5 {
		at = at.Add(lease / 2)
		held, err = s.Renew(ctx, k, "next", lease, at)
		require.NoError(t, err)
		require.True(t, held)
		ok, err = s.Acquire(ctx, k, 1, "other", lease, at.Add(lease/2))
		require.NoError(t, err)
		require.False(t, ok)
	}
	// A lease that ended while nobody wanted the slot is still renewed.
	held, err = s.Renew(ctx, k, "next", lease, at.Add(2*lease))
	require.NoError(t, err)
	require.True(t, held)
}

func TestAcquireRefusesBadArguments(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k, now := t.Context(), key(t, "v"), time.Now()
	for name, err := range map[string]error{
		"limit 0":         first(s.Acquire(ctx, k, 0, "c", time.Minute, now)),
		"limit too large": first(s.Acquire(ctx, k, limits.MaxConcurrency+1, "c", time.Minute, now)),
		"short lease":     first(s.Acquire(ctx, k, 1, "c", time.Millisecond, now)),
		"empty call":      first(s.Acquire(ctx, k, 1, "", time.Minute, now)),
		"renew no call":   first(s.Renew(ctx, k, "", time.Minute, now)),
		"release no call": s.Release(ctx, k, ""),
		"bad tenant":      s.Release(ctx, limits.Key{Tenant: "a b", Limit: "l"}, "c"),
	} {
		require.ErrorIs(t, err, limits.ErrInvalid, name)
	}
}

// At the cap, all of MaxConcurrency holders fit in one value.
func TestAcquireMaxConcurrency(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k, now := t.Context(), key(t, "v"), time.Now()
	for i := range limits.MaxConcurrency {
		ok, err := s.Acquire(ctx, k, limits.MaxConcurrency, "call-"+itoa(i), time.Hour, now)
		require.NoError(t, err)
		require.True(t, ok, i)
	}
	ok, err := s.Acquire(ctx, k, limits.MaxConcurrency, "one-more", time.Hour, now)
	require.NoError(t, err)
	require.False(t, ok)
}

func first[T any](v T, err error) error { return err }
