package limits_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/limits"
)

// A burst is admitted at once, the next unit is refused with the time it
// would take, and units come back at the rate.
func TestAllowBurstThenRate(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k := t.Context(), key(t, "agent-1")
	r := limits.Rate{Count: 10, Per: time.Second, Burst: 3} // one unit every 100 ms
	now := time.Now()
	for i := range 3 {
		ok, after, err := s.Allow(ctx, k, r, 1, now)
		require.NoError(t, err)
		require.True(t, ok, "unit %d of the burst", i)
		require.Zero(t, after)
	}
	ok, after, err := s.Allow(ctx, k, r, 1, now)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 100*time.Millisecond, after)

	// Refused at 99 ms, admitted at 100 ms: the refusal spent nothing.
	ok, after, err = s.Allow(ctx, k, r, 1, now.Add(99*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, time.Millisecond, after)
	ok, _, err = s.Allow(ctx, k, r, 1, now.Add(100*time.Millisecond))
	require.NoError(t, err)
	require.True(t, ok)

	// A cost of 2 needs 200 ms of credit.
	ok, after, err = s.Allow(ctx, k, r, 2, now.Add(100*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 200*time.Millisecond, after)
	ok, _, err = s.Allow(ctx, k, r, 2, now.Add(300*time.Millisecond))
	require.NoError(t, err)
	require.True(t, ok)

	// After an idle spell the whole burst is back, never more.
	later := now.Add(time.Minute)
	for range 3 {
		ok, _, err = s.Allow(ctx, k, r, 1, later)
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, _, err = s.Allow(ctx, k, r, 1, later)
	require.NoError(t, err)
	require.False(t, ok)
}

// Keys are independent: another value, limit or tenant has its own TAT.
func TestAllowKeysAreIndependent(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, now := t.Context(), time.Now()
	r := limits.Rate{Count: 1, Per: time.Hour, Burst: 1}
	a := key(t, "a")
	for _, k := range []limits.Key{a, {Tenant: a.Tenant, Limit: a.Limit, Value: "b"}, {Tenant: "other", Limit: a.Limit, Value: "a"},
		{Tenant: a.Tenant, Limit: a.Limit, Value: "a.b"}, {Tenant: a.Tenant, Limit: a.Limit, Value: "a_b"}, {Tenant: a.Tenant, Limit: a.Limit, Value: ""}} {
		ok, _, err := s.Allow(ctx, k, r, 1, now)
		require.NoError(t, err)
		require.True(t, ok, "%+v", k)
	}
	ok, _, err := s.Allow(ctx, a, r, 1, now)
	require.NoError(t, err)
	require.False(t, ok)
}

// Bad arguments are refused before anything is read or written.
func TestAllowRefusesBadArguments(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, now := t.Context(), time.Now()
	good := limits.Rate{Count: 1, Per: time.Second, Burst: 2}
	for name, c := range map[string]struct {
		k    limits.Key
		r    limits.Rate
		cost int64
	}{
		"tenant with a dot":    {limits.Key{Tenant: "a.b", Limit: "l", Value: "v"}, good, 1},
		"empty tenant":         {limits.Key{Limit: "l", Value: "v"}, good, 1},
		"empty limit":          {limits.Key{Tenant: "t", Value: "v"}, good, 1},
		"long value":           {limits.Key{Tenant: "t", Limit: "l", Value: string(make([]byte, limits.MaxInputBytes+1))}, good, 1},
		"zero count":           {limits.Key{Tenant: "t", Limit: "l"}, limits.Rate{Per: time.Second, Burst: 1}, 1},
		"zero burst":           {limits.Key{Tenant: "t", Limit: "l"}, limits.Rate{Count: 1, Per: time.Second}, 1},
		"tiny period":          {limits.Key{Tenant: "t", Limit: "l"}, limits.Rate{Count: 1, Per: time.Microsecond, Burst: 1}, 1},
		"cost above the burst": {limits.Key{Tenant: "t", Limit: "l"}, good, 3},
		"zero cost":            {limits.Key{Tenant: "t", Limit: "l"}, good, 0},
		"burst over a year":    {limits.Key{Tenant: "t", Limit: "l"}, limits.Rate{Count: 1, Per: 24 * time.Hour, Burst: 400}, 1},
	} {
		_, _, err := s.Allow(ctx, c.k, c.r, c.cost, now)
		require.ErrorIs(t, err, limits.ErrInvalid, name)
	}
	require.Zero(t, s.Stats().Requests)
}
