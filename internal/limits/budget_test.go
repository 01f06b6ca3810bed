package limits_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/limits"
)

func itoa(i int) string { return strconv.Itoa(i) }

// A budget admits spends while they fit whole, refuses the one that does
// not fit without spending it, then admits a smaller one that fits; the
// window's reset starts again from zero.
func TestSpendBudgetWindow(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k := t.Context(), key(t, "sess-1")
	b := limits.Budget{Limit: 10, Window: time.Hour}
	now := time.Date(2031, 5, 6, 7, 30, 0, 0, time.UTC)
	start, reset := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC), time.Date(2031, 5, 6, 8, 0, 0, 0, time.UTC)

	ok, u, err := s.Spend(ctx, k, 7, b, now)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, limits.Usage{Used: 7, Limit: 10, Remaining: 3, Start: start, ResetAt: reset}, u)

	ok, u, err = s.Spend(ctx, k, 4, b, now)
	require.NoError(t, err)
	require.False(t, ok, "4 does not fit in 3")
	require.Equal(t, int64(7), u.Used, "a refused spend spends nothing")
	require.Equal(t, reset, u.ResetAt)

	ok, u, err = s.Spend(ctx, k, 3, b, now.Add(29*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, u.Remaining)

	got, err := s.Usage(ctx, k, b, now)
	require.NoError(t, err)
	require.Equal(t, limits.Usage{Used: 10, Limit: 10, Remaining: 0, Start: start, ResetAt: reset}, got)

	// The next window starts from zero; the usage of a window nobody spent
	// in is zero.
	ok, u, err = s.Spend(ctx, k, 1, b, reset)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, limits.Usage{Used: 1, Limit: 10, Remaining: 9, Start: reset, ResetAt: reset.Add(time.Hour)}, u)
	got, err = s.Usage(ctx, k, b, reset.Add(5*time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(0), got.Used)
	require.Equal(t, int64(10), got.Remaining)
}

// A daily budget resets at midnight UTC, whatever the caller's zone.
func TestSpendDailyWindowIsUTC(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	zone := time.FixedZone("UTC+5", 5*3600)
	now := time.Date(2031, 1, 2, 3, 0, 0, 0, zone) // 2031-01-01 22:00 UTC
	_, u, err := s.Spend(t.Context(), key(t, "t"), 1, limits.Budget{Limit: 5, Window: 24 * time.Hour}, now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), u.Start)
	require.Equal(t, time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC), u.ResetAt)
}

func TestSpendRefusesBadArguments(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k, now := t.Context(), key(t, "v"), time.Now()
	good := limits.Budget{Limit: 5, Window: time.Hour}
	for name, b := range map[string]limits.Budget{
		"zero limit":       {Window: time.Hour},
		"fractional":       {Limit: 1, Window: 1500 * time.Millisecond},
		"window too long":  {Limit: 1, Window: 400 * 24 * time.Hour},
		"window too short": {Limit: 1, Window: 0},
	} {
		_, _, err := s.Spend(ctx, k, 1, b, now)
		require.ErrorIs(t, err, limits.ErrInvalid, name)
		_, err = s.Usage(ctx, k, b, now)
		require.ErrorIs(t, err, limits.ErrInvalid, name)
	}
	_, _, err := s.Spend(ctx, k, 0, good, now)
	require.ErrorIs(t, err, limits.ErrInvalid)
	_, _, err = s.Spend(ctx, k, -3, good, now)
	require.ErrorIs(t, err, limits.ErrInvalid)
	// A spend larger than the whole budget is a refusal, not an error.
	ok, u, err := s.Spend(ctx, k, 6, good, now)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, int64(5), u.Remaining)
}

// A refund gives units back to the window they were spent in, never below
// zero; refunding an empty window writes nothing.
func TestRefund(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, k := t.Context(), key(t, "sess")
	b := limits.Budget{Limit: 3, Window: time.Hour}
	now := time.Date(2031, 5, 6, 7, 59, 0, 0, time.UTC)
	ok, _, err := s.Spend(ctx, k, 3, b, now)
	require.NoError(t, err)
	require.True(t, ok)
	// Refunded after the window has ended: it goes to the window it was
	// spent in.
	u, err := s.Refund(ctx, k, 2, b, now)
	require.NoError(t, err)
	require.Equal(t, int64(1), u.Used)
	ok, u, err = s.Spend(ctx, k, 2, b, now.Add(30*time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(3), u.Used)
	u, err = s.Refund(ctx, k, 10, b, now)
	require.NoError(t, err)
	require.Zero(t, u.Used)
	writes := s.Stats().Writes
	u, err = s.Refund(ctx, k, 1, b, now.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, u.Used)
	require.Equal(t, writes, s.Stats().Writes)
	_, err = s.Refund(ctx, k, 0, b, now)
	require.ErrorIs(t, err, limits.ErrInvalid)
}
