package worker

import "sync"

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
// returns. Go must not be called after Stop.
type runners struct {
	idle chan chan func()
	done chan struct{}
	once sync.Once
}

func newRunners(maxIdle int) *runners {
	return &runners{idle: make(chan chan func(), max(maxIdle, 1)), done: make(chan struct{})}
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
	go r.run(jobs)
}

func (r *runners) run(jobs chan func()) {
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

// Stop ends the idle runners and every runner when its function returns.
func (r *runners) Stop() { r.once.Do(func() { close(r.done) }) }
