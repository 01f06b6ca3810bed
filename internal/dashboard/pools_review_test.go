package dashboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
)

// finished sums the calls of pool counted so far: in its samples and
// since the last one.
func (p *poolHistory) finished(pool string) (done, errs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.pools[pool]; r != nil {
		for _, s := range r.samples {
			done, errs = done+s.Done, errs+s.Errors
		}
	}
	return done + p.done[pool], errs + p.errs[pool]
}

// When the index ends the pool history's live subscription (its feed's
// run stopped, to be started again), the history subscribes again at its
// next sample and counts the calls that finish from then on.
func TestReviewPoolsSubscribeAgainWhenTheIndexEndsTheirs(t *testing.T) {
	t.Parallel()
	u := startUIWith(t, pageTools(), dispatch.Config{}, nil, func(s *Server) { s.pools.every = 20 * time.Millisecond })
	h, x := u.UI.pools, u.UI.index
	waitFor(t, "the pool history subscribes", func() bool { return x.Stats().Subscribers == 1 })
	pool := u.Dispatcher.PoolOf("acme", mustSpec(t, u, "echo"))
	require.NotEmpty(t, pool)
	call(t, u, acmeBot, "echo", `{"text":"a"}`)
	waitFor(t, "the call is counted", func() bool { done, _ := h.finished(pool); return done == 1 })

	// The feed stops (its subscriptions end, as when a run of it fails)
	// and a new one carries on.
	require.NoError(t, u.UI.feed.Stop(t.Context()))
	again := callindex.NewFeed(x)
	require.NoError(t, again.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, again.Stop(context.Background())) })
	waitFor(t, "the pool history subscribes again", func() bool { return x.Stats().Subscribers == 1 })
	waitFor(t, "the new feed follows the streams", func() bool { return x.Stats().Live })
	call(t, u, acmeBot, "echo", `{"text":"b"}`)
	call(t, u, acmeBot, "fail", `{"type":"TIMEOUT","retryable":false}`)
	waitFor(t, "the calls after the new subscription are counted", func() bool {
		done, errs := h.finished(pool)
		return done == 3 && errs == 1
	})
}

// The pool history keeps at most maxWorkers workers, forgetting the one
// silent longest, and historyPoints samples a pool, oldest first.
func TestReviewPoolsHistoryIsBounded(t *testing.T) {
	t.Parallel()
	p := newPoolHistory(nil)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxWorkers + 50 {
		p.saw(callindex.Entry{Worker: fmt.Sprintf("w%04d", i), Outcome: audit.OutcomeOK}, "p", t0.Add(time.Duration(i)*time.Second))
	}
	p.saw(callindex.Entry{Worker: "w1020", Outcome: audit.OutcomeOK}, "p", t0.Add(time.Hour)) // seen again
	require.Len(t, p.workers, maxWorkers)
	for i := range 50 {
		require.NotContains(t, p.workers, fmt.Sprintf("w%04d", i), "the oldest are forgotten")
	}
	require.Equal(t, 2, p.workers["w1020"].Calls)
	require.Equal(t, t0.Add(time.Hour), p.workers["w1020"].LastSeen)

	r := &poolRing{}
	for i := range 3*historyPoints + 7 {
		r.add(poolSample{Done: i})
	}
	got := r.ordered()
	require.Len(t, got, historyPoints)
	for i, s := range got {
		require.Equal(t, 2*historyPoints+7+i, s.Done)
	}
}
