package worker

import (
	"context"
	"sync"
)

// runners runs functions on goroutines that outlive them. Each call's
// handler (which also runs its execution, see watchdog.go) needs a
// goroutine of its own; a fresh goroutine per call starts on a small stack
// and grows it, copying, on every call (JSON decoding alone takes it past
// the first sizes). A runner keeps the stack earlier calls grew.
//
// A runner serves one call after another, so what a tool leaves on its
// goroutine stays for the next call: a tool must undo
// runtime.LockOSThread and goroutine labels it sets (pkg/tool says so).
//
// Go never blocks: with no idle runner it starts one. A runner that
// finishes goes idle unless maxIdle runners already are, and then ends;
// so an execution abandoned by the watchdog holds its runner only until it
// returns. Stop ends the idle runners; busy ones end when their function
// returns, and Wait waits for them. Go must not be called after Stop.
type runners struct {
	idle chan chan func()
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	live    int  // runners started and not ended
	stopped bool // Stop was called
	// ended is closed once Stop was called and every runner has ended.
	ended chan struct{}
}

func newRunners(maxIdle int) *runners {
	return &runners{idle: make(chan chan func(), max(maxIdle, 1)), done: make(chan struct{}), ended: make(chan struct{})}
}

// Go runs f on an idle runner, or on a new one.
func (r *runners) Go(f func()) {
	select {
	case jobs := <-r.idle:
		jobs <- f
		return
	default:
	}
	jobs := make(chan func(), 1)
	jobs <- f
	r.mu.Lock()
	r.live++
	r.mu.Unlock()
	go r.run(jobs)
}

func (r *runners) run(jobs chan func()) {
	defer r.exit()
	for {
		select {
		case f := <-jobs:
			f()
		case <-r.done:
			return
		}
		select {
		case r.idle <- jobs:
		default:
			return // enough runners idle already
		}
	}
}

// exit counts a runner out.
func (r *runners) exit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live--
	if r.live == 0 && r.stopped {
		close(r.ended)
	}
}

// Stop ends the idle runners and every runner when its function returns.
func (r *runners) Stop() {
	r.once.Do(func() {
		close(r.done)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stopped = true
		if r.live == 0 {
			close(r.ended)
		}
	})
}

// Wait waits, after Stop, until every runner has ended (nil) or ctx ends
// (its error).
func (r *runners) Wait(ctx context.Context) error { return waitFor(ctx, r.ended) }
