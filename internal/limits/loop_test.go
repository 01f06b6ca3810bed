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
		require.Equal(t, limits.Run{Count: want, Period: 1}, n)
	}
	n, err := s.Repeat(ctx, scope, other, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n.Count, "a different call resets the run")
	n, err = s.Repeat(ctx, scope, same, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n.Count)
	n, err = s.Repeat(ctx, scope, same, window, now.Add(window))
	require.NoError(t, err)
	require.Equal(t, 2, n.Count, "a repeat exactly a window later continues the run")
	n, err = s.Repeat(ctx, scope, same, window, now.Add(2*window+time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, 1, n.Count, "a pause longer than the window ends it")

	// Another session has its own run.
	n, err = s.Repeat(ctx, key(t, "session-2"), same, window, now)
	require.NoError(t, err)
	require.Equal(t, 1, n.Count)
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

// Cycles of two and three calls count as loops: A, B, A, B, … repeats
// (A, B) once per two calls, A, B, C, … once per three; a call that breaks
// the cycle starts it over, and a period of one still counts every call.
func TestRepeatSeesCycles(t *testing.T) {
	t.Parallel()
	s := setup(t).inProcess(t, limits.Config{})
	ctx, now, window := t.Context(), time.Now(), time.Minute
	fps := map[byte]string{}
	for _, c := range []byte("ABCD") {
		fps[c] = fingerprint(string(c))
	}
	run := func(scope limits.Key, calls string) []limits.Run {
		var got []limits.Run
		for i := range len(calls) {
			n, err := s.Repeat(ctx, scope, fps[calls[i]], window, now)
			require.NoError(t, err)
			got = append(got, n)
		}
		return got
	}
	counts := func(runs []limits.Run) (c []int) {
		for _, r := range runs {
			c = append(c, r.Count)
		}
		return c
	}
	two := run(key(t, "two"), "ABABABAB")
	require.Equal(t, []int{1, 1, 1, 2, 2, 3, 3, 4}, counts(two))
	require.Equal(t, limits.Run{Count: 4, Period: 2}, two[7])
	three := run(key(t, "three"), "ABCABCABC")
	require.Equal(t, []int{1, 1, 1, 1, 1, 2, 2, 2, 3}, counts(three))
	require.Equal(t, 3, three[8].Period)
	require.Equal(t, []int{1, 1, 1, 2, 1, 1, 1, 2}, counts(run(key(t, "broken"), "ABABCDCD")), "C breaks (A, B); (C, D) starts over")
	require.Equal(t, []int{1, 2, 3, 4, 5}, counts(run(key(t, "same"), "AAAAA")))
	require.Equal(t, []int{1, 1, 1, 1, 1, 1}, counts(run(key(t, "none"), "ABCDAC")), "no cycle")
	// A pause longer than the window starts every cycle over.
	scope := key(t, "pause")
	run(scope, "ABABAB")
	n, err := s.Repeat(ctx, scope, fps['A'], window, now.Add(window+time.Second))
	require.NoError(t, err)
	require.Equal(t, limits.Run{Count: 1, Period: 1}, n)
}
