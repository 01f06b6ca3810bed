package delayed

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Queue fires records after one fixed delay, in the order they were added
// (up to flushParallel at once: see flushAll).
// Start it before Add; Stop it when done. Safe for concurrent use.
type Queue struct {
	delay time.Duration
	tick  time.Duration

	mu      sync.Mutex
	pending []*Record
	done    chan struct{}
	wg      sync.WaitGroup
	started bool
	stopped bool
}

// Record is one pending record. Once published or stopped it lets go of
// its publish function (and what that holds: a stopped record stays in
// the queue until it is due, and most are stopped).
type Record struct {
	mu      sync.Mutex
	publish func() // nil once published or stopped
	due     time.Time
}

// NewQueue returns a queue that fires records delay after they are added,
// checking every delay/4.
func NewQueue(delay time.Duration) *Queue {
	return &Queue{delay: delay, tick: max(delay/4, time.Millisecond), done: make(chan struct{})}
}

// ErrStopped is returned by Start after Stop: a stopped queue does not
// start again.
var ErrStopped = errors.New("delayed: queue stopped")

// Start starts the queue's goroutine (startstop.Service; once).
func (q *Queue) Start(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return ErrStopped
	}
	if q.started {
		return nil
	}
	q.started = true
	q.wg.Add(1)
	go q.run()
	return nil
}

// Stop fires nothing more and waits for the goroutine (or until ctx
// ends). Pending records are dropped unless flushed. Idempotent; safe
// before Start.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	if !q.stopped {
		q.stopped = true
		close(q.done)
	}
	q.mu.Unlock()
	stopped := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Add schedules publish to run after the queue's delay, unless the record
// is flushed or stopped first.
func (q *Queue) Add(publish func()) *Record {
	r := &Record{due: time.Now().Add(q.delay), publish: publish}
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	return r
}

// Flush publishes the record now if it has not been published or stopped.
// It returns once the record is published, also when another goroutine
// publishes it meanwhile.
func (r *Record) Flush() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.publish; p != nil {
		r.publish = nil
		p()
	}
}

// Stop makes sure the record is never published (unless it already was).
func (r *Record) Stop() {
	if r != nil {
		r.mu.Lock()
		r.publish = nil
		r.mu.Unlock()
	}
}

func (q *Queue) run() {
	defer q.wg.Done()
	t := time.NewTicker(q.tick)
	defer t.Stop()
	var due []*Record
	for {
		select {
		case <-q.done:
			return
		case now := <-t.C:
			q.mu.Lock()
			n := 0
			for n < len(q.pending) && !q.pending[n].due.After(now) {
				n++
			}
			due = append(due[:0], q.pending[:n]...)
			// Shift rather than reslice, so the backing array does not grow
			// without bound.
			q.pending = append(q.pending[:0], q.pending[n:]...)
			q.mu.Unlock()
			flushAll(due)
			clear(due)
		}
	}
}

// flushParallel bounds the records a tick publishes at once.
const flushParallel = 32

// flushAll publishes the due records that are still live, up to
// flushParallel at a time, and returns when all are published: their
// publishes overlap, and so do their signatures, which a key makes in
// batches only for concurrent signers (internal/signing): one after
// another, each would wait for the last.
func flushAll(due []*Record) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, flushParallel)
	for _, r := range due {
		if !r.live() {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.Flush()
		})
	}
	wg.Wait()
}

// live reports whether r is still to be published.
func (r *Record) live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publish != nil
}
