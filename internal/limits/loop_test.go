package limits_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/limits"
)

func fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The same call ten times in a row counts 1..10 (the default thresholds
// warn at 3, ask at 5, deny at 10); another call starts a new run, and so
// does a pause longer than the window.
func TestRepeatCountsARun(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, scope := t.Context(), key(t, "session-1")
	same, other := fingerprint(`search{"q":"x"}`), fingerprint(`search{"q":"y"}`)
	window := time.Minute
	now := time.Now()
	for want := 1; want <= 10; want++ {
		now = now.Add(30 * time.Second)
		n, err := s.Repeat(ctx, scope, same, window, now)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	n, err := s.Repeat(ctx, scope, other, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a different call resets the run")
	n, err = s.Repeat(ctx, scope, same, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.Repeat(ctx, scope, same, window, now.Add(window))
	require.NoError(t, err)
	require.Equal(t, 2, n, "a repeat exactly a window later continues the run")
	n, err = s.Repeat(ctx, scope, same, window, now.Add(2*window+time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, 1, n, "a pause longer than the window ends it")

	// Another session has its own run.
	n, err = s.Repeat(ctx, key(t, "session-2"), same, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestRepeatRefusesBadArguments(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, scope, now := t.Context(), key(t, "s"), time.Now()
	for name, fp := range map[string]string{
		"empty":     "",
		"short":     fingerprint("x")[:63],
		"not hex":   "zz" + fingerprint("x")[2:],
		"uppercase": "ZZ" + fingerprint("x")[2:],
	} {
		_, err := s.Repeat(ctx, scope, fp, time.Minute, now)
		require.ErrorIs(t, err, limits.ErrInvalid, name)
	}
	_, err := s.Repeat(ctx, scope, fingerprint("x"), 0, now)
	require.ErrorIs(t, err, limits.ErrInvalid)
}
