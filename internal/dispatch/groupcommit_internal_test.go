package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blockedFirst is a request function whose first request waits for
// release (the request in flight while the test's callers come); it
// counts the requests and adds each one's n to counter.
type blockedFirst struct {
	requests, counter atomic.Int64
	first, release    chan struct{}
}

func newBlockedFirst() *blockedFirst {
	return &blockedFirst{first: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockedFirst) run(_ context.Context, n int) (chainAdd, error) {
	if b.requests.Add(1) == 1 {
		close(b.first)
		<-b.release
	}
	return chainAdd{total: b.counter.Add(int64(n)), n: n}, nil
}

// gathered waits until n callers of key wait behind its request in flight.
func gathered[R any](t *testing.T, g *groupCommit[R], key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		grp := g.flying[key]
		return grp != nil && grp.next != nil && grp.next.n == n
	}, 30*time.Second, 5*time.Millisecond)
}

// Callers of one key that come while its request is in flight share the
// next one, made when it ends: every caller is answered, each with its
// own place (no count given twice), two requests for all. Under waitAll
// the callers whose context has ended are answered too, the one that
// runs the shared request and one that only waits (its add is made and it knows its count).
func TestGroupCommitSharesTheNextRequest(t *testing.T) {
	t.Parallel()
	g := groupCommit[chainAdd]{waitAll: true}
	b := newBlockedFirst()
	const callers = 50
	counts := make(chan int64, callers+1)
	var wg sync.WaitGroup
	call := func(ctx context.Context) {
		defer wg.Done()
		add, place, err := g.do(ctx, "k", b.run)
		if err == nil {
			counts <- add.total - int64(add.n) + int64(place) + 1
		}
	}
	wg.Add(1)
	go call(t.Context())
	<-b.first
	gone, leave := context.WithCancel(t.Context())
	leave()
	wg.Add(1)
	go call(gone) // the first to gather: it runs the next request
	gathered(t, &g, "k", 1)
	wg.Add(1)
	go call(gone) // one that only waits, whose context has ended too
	gathered(t, &g, "k", 2)
	wg.Add(callers - 2)
	for range callers - 2 {
		go call(t.Context())
	}
	gathered(t, &g, "k", callers)
	close(b.release)
	wg.Wait()
	close(counts)
	seen := map[int64]bool{}
	for c := range counts {
		require.False(t, seen[c], "count %d given twice", c)
		seen[c] = true
	}
	require.Len(t, seen, callers+1, "every caller answered, the one whose context ended too")
	require.Equal(t, int64(callers+1), b.counter.Load())
	require.Equal(t, int64(2), b.requests.Load(), "one request in flight, one for all who came meanwhile")
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.flying, "the key's group ends with its last request")
}

// Without waitAll a caller whose context ends leaves at once with its
// context's error, while the request it joined is still to be made; the
// caller that runs it waits and is answered, and the request is made.
func TestGroupCommitCallerLeaves(t *testing.T) {
	t.Parallel()
	var g groupCommit[chainAdd]
	b := newBlockedFirst()
	answered := make(chan error, 3)
	call := func(ctx context.Context) {
		_, _, err := g.do(ctx, "k", b.run)
		answered <- err
	}
	go call(t.Context())
	<-b.first
	go call(t.Context()) // runs the next request
	gathered(t, &g, "k", 1)
	leaving, leave := context.WithCancel(t.Context())
	go call(leaving)
	gathered(t, &g, "k", 2)
	leave()
	require.ErrorIs(t, <-answered, context.Canceled, "it leaves while the first request is still in flight")
	close(b.release)
	require.NoError(t, <-answered)
	require.NoError(t, <-answered)
	require.Equal(t, int64(2), b.requests.Load())
	require.Equal(t, int64(3), b.counter.Load(), "the request is made for the caller that left too")
}

// A request that panics answers the callers it was made for with an
// error, never with a zero value taken for an answer, and ends its
// key's turn: the next caller's request is made.
func TestGroupCommitPanicIsNoAnswer(t *testing.T) {
	t.Parallel()
	var g groupCommit[chainAdd]
	b := newBlockedFirst()
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _, _ = g.do(t.Context(), "k", func(ctx context.Context, n int) (chainAdd, error) {
			_, _ = b.run(ctx, n) // the first request: in flight until release
			panic("boom")
		})
	}()
	<-b.first
	again := make(chan any, 1)
	go func() { // runs the next request, which panics too
		defer func() { again <- recover() }()
		_, _, _ = g.do(t.Context(), "k", func(context.Context, int) (chainAdd, error) { panic("boom again") })
	}()
	gathered(t, &g, "k", 1)
	waiting := make(chan error, 1)
	go func() {
		// Gathered behind the same panicking request as the one above.
		_, _, err := g.do(t.Context(), "k", b.run)
		waiting <- err
	}()
	gathered(t, &g, "k", 2)
	close(b.release)
	require.Equal(t, "boom", <-panicked)
	require.ErrorIs(t, <-waiting, errRequestPanicked, "gathered behind a request that panicked")
	require.Equal(t, "boom again", <-again)
	_, _, err := g.do(t.Context(), "k", b.run)
	require.NoError(t, err, "the key's turn ended: a new request is made")
}
