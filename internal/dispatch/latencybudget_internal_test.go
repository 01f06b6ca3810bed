package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
)

// fullWatch is a latency watch holding maxWatchedCalls calls admitted
// just now, "c0" the first.
func fullWatch(t testing.TB) *latencyWatch {
	t.Helper()
	lw := &latencyWatch{}
	now := time.Now()
	for i := range maxWatchedCalls {
		require.Empty(t, lw.add(fmt.Sprintf("c%d", i), watchedCall{tenant: "t", tool: "x", accepted: now, budget: policy.LatencyBudget{Soft: time.Second}}))
	}
	return lw
}

// A full watch (overload: every watched call recent) still watches a new
// call: the oldest watched is forgotten, one for one, so the watch never
// grows past its bound and an add never walks it.
func TestLatencyWatchFullForgetsTheOldest(t *testing.T) {
	t.Parallel()
	lw := fullWatch(t)
	lw.add("new", watchedCall{tenant: "t", tool: "x", accepted: time.Now()})
	_, ok := lw.watched("new")
	require.True(t, ok, "a new call is watched")
	_, ok = lw.watched("c0")
	require.False(t, ok, "the oldest watched call is forgotten")
	_, ok = lw.watched("c1")
	require.True(t, ok, "one for one")
	require.Equal(t, maxWatchedCalls, len(lw.calls))

	// A call taken (its result came) leaves its place; the watch stays
	// within its bound however calls come and go.
	lw.forget("c2")
	require.Equal(t, "c1", lw.add("newer", watchedCall{tenant: "t"}), "the oldest still watched is the one forgotten")
	require.Equal(t, "", lw.add("newest", watchedCall{tenant: "t"}), "c2's place: nothing left to forget")
	require.Equal(t, maxWatchedCalls, len(lw.calls))
}

// Adding to a full watch costs the same as adding to an empty one: no
// walk of the watched calls under the lock the results consumer needs.
func BenchmarkLatencyWatchAddFull(b *testing.B) {
	lw := fullWatch(b)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i)
	}
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		lw.add(ids[i], watchedCall{tenant: "t", accepted: now})
	}
}

// A result stored on another tenant's subject for a watched call's id
// leaves the call watched: only its own result takes it from the watch.
func TestLatencyWatchTakenOnlyByItsOwnSubject(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{}
	d.cfg.Name = "d1"
	d.latency.add("c", watchedCall{tenant: "a", tool: "x"})
	_, ok := d.takeWatched("c", d.subj.Result("b", "d1", "c"))
	require.False(t, ok, "another tenant's subject")
	_, ok = d.latency.watched("c")
	require.True(t, ok, "still watched")
	c, ok := d.takeWatched("c", d.subj.Result("a", "d1", "c"))
	require.True(t, ok)
	require.Equal(t, "a", c.tenant)
	_, ok = d.latency.watched("c")
	require.False(t, ok, "measured once")
}
