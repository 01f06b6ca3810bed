package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Callers of one key that come while its request is in flight share the
// next one: every caller is answered, each with its own place, the
// requests are fewer than the callers, every request starts after each
// caller it answers joined, and a caller whose context ends leaves
// without stopping the request the others wait for.
func TestGroupCommitSharesTheNextRequest(t *testing.T) {
	t.Parallel()
	var g groupCommit[chainAdd]
	var (
		counter  atomic.Int64
		requests atomic.Int64
	)
	release := make(chan struct{})
	first := make(chan struct{})
	run := func(_ context.Context, n int) (chainAdd, error) {
		if requests.Add(1) == 1 {
			close(first)
			<-release // the first request is in flight while the others come
		}
		return chainAdd{total: counter.Add(int64(n)), n: n}, nil
	}
	const callers = 50
	counts := make(chan int64, callers)
	var wg sync.WaitGroup
	call := func(ctx context.Context) {
		defer wg.Done()
		add, place, err := g.do(ctx, "k", run)
		if err == nil {
			counts <- add.total - int64(add.n) + int64(place) + 1
		}
	}
	wg.Add(1)
	go call(t.Context())
	<-first
	gone, leave := context.WithCancel(t.Context())
	wg.Add(callers)
	for i := range callers {
		ctx := t.Context()
		if i == 0 {
			ctx = gone // the first caller gathered runs the next request: it leaves, the request is made
		}
		go call(ctx)
	}
	leave()
	// Every caller has joined the next request before the first ends.
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		next := g.flying["k"].next
		return next != nil && next.n == callers
	}, 30*time.Second, 5*time.Millisecond)
	close(release)
	wg.Wait()
	close(counts)
	seen := map[int64]bool{}
	for c := range counts {
		require.False(t, seen[c], "count %d given twice", c)
		seen[c] = true
	}
	require.GreaterOrEqual(t, len(seen), callers) // the one that left may have had its answer first
	require.Equal(t, int64(callers+1), counter.Load(), "every caller added once, the one that left too")
	require.Equal(t, int64(2), requests.Load(), "one request in flight, one for all who came meanwhile")
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.flying, "the key's group ends with its last request")
}
