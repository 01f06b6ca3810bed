package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// groupCommit runs one request for the callers of one key that arrive
// while an earlier request for that key is in flight, as a database
// commits a group of transactions with one log write: a caller with none
// in flight runs its own request at once; callers that come while it
// runs gather, and the first of them runs one request for all when it
// ends. Each caller's request therefore starts after the caller joined,
// as its own would have (what a read returns is no older than the
// caller's arrival: a delegated call's tombstone read must start after
// its link was written), and n callers of one key cost about one request
// per round trip instead of n (doc.go, "Delegation chains": the children
// of one parent admitted at the same time).
//
// The request runs on the context of the caller that runs it, without
// its cancellation (the others wait for it), bounded by groupCommitWait.
// That caller waits for the request in flight and then for its own
// whatever its context does (at most groupCommitWait each): the others'
// answers depend on it. Another caller whose context ends first leaves
// with its context's error, unless the group commit waits for all
// (waitAll: what it does for a caller cannot be undone without its
// answer, as a counter add, which the caller takes back when it is
// refused).
type groupCommit[R any] struct {
	// waitAll makes every caller wait for its request's answer whatever
	// its context does (bounded by groupCommitWait).
	waitAll bool
	mu      sync.Mutex
	flying  map[string]*commitGroup[R] // by key, while a request for it is in flight
}

// commitGroup is the callers of one key gathering behind the request in
// flight (next), and whether one is in flight.
type commitGroup[R any] struct {
	key  string
	next *commit[R]
}

// commit is one request and the callers it is made for.
type commit[R any] struct {
	n     int           // the callers it is made for; fixed once it starts
	start chan struct{} // closed when it is its turn (its first caller runs it)
	done  chan struct{} // closed when res and err are set
	res   R
	err   error
}

// groupCommitWait bounds one request of a group commit.
const groupCommitWait = 10 * time.Second

// errRequestPanicked answers the callers of a request that panicked.
var errRequestPanicked = errors.New("dispatch: a shared request panicked")

// do runs run(ctx, n) once for the n callers of key that share it and
// returns its result and this caller's place among them (0 to n-1).
func (g *groupCommit[R]) do(ctx context.Context, key string, run func(ctx context.Context, n int) (R, error)) (R, int, error) {
	g.mu.Lock()
	if g.flying == nil {
		g.flying = map[string]*commitGroup[R]{}
	}
	grp, inFlight := g.flying[key]
	if !inFlight {
		grp = &commitGroup[R]{key: key}
		g.flying[key] = grp
	}
	c := grp.next
	if c == nil {
		c = &commit[R]{start: make(chan struct{}), done: make(chan struct{})}
		grp.next = c
	}
	place := c.n
	c.n++
	if !inFlight {
		grp.next = nil // this one starts now: later callers gather behind it
		close(c.start)
	}
	g.mu.Unlock()
	if place == 0 {
		// This caller runs the request (now, or when the one in flight
		// ends): the others wait for it whatever its own context does.
		<-c.start
		g.run(ctx, grp, c, run)
	}
	if g.waitAll {
		<-c.done
		return c.res, place, c.err
	}
	select {
	case <-c.done:
		return c.res, place, c.err
	case <-ctx.Done():
		select {
		case <-c.done: // answered as well: the answer, not the context's end
			return c.res, place, c.err
		default:
		}
		var zero R
		return zero, place, ctx.Err()
	}
}

// run makes commit c's request, then starts the commit gathered behind it
// (its first caller runs it), or ends the key's group when none did.
// The hand-off is deferred: a request that panics still ends its group's
// turn, and answers its callers errRequestPanicked, never a zero value
// taken for an answer (the panic goes on).
func (g *groupCommit[R]) run(ctx context.Context, grp *commitGroup[R], c *commit[R], run func(ctx context.Context, n int) (R, error)) {
	c.err = errRequestPanicked // until run returns
	defer func() {
		g.mu.Lock()
		if nxt := grp.next; nxt != nil {
			grp.next = nil
			close(nxt.start)
		} else {
			delete(g.flying, grp.key)
		}
		g.mu.Unlock()
		close(c.done)
	}()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCommitWait)
	defer cancel()
	c.res, c.err = run(rctx, c.n)
}
