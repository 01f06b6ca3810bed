package worker

import (
	"context"
	"sync/atomic"
	"time"
)

// An attempt runs on its handler's goroutine, not on one of its own: a
// goroutine per execution, and the hand-offs to it and back, are a
// measurable share of a fast call. The handler cannot watch an execution
// that ignores its context while running it, so one watchdog goroutine per
// worker does: it visits the running calls every Watchdog/4, notes when it
// first sees an attempt's context ended, and abandons the attempt once it
// has run on for Watchdog since — between Watchdog and 1.5×Watchdog after
// its context ended. Abandoning does what the handler would: it stops the
// call's heartbeats (so JetStream redelivers it after AckWait), counts and
// logs it, and frees the call's slot in its pool; the handler, when the
// execution finally returns, leaves the call unsettled.

// Execution states: running until the handler marks it returned or the
// watchdog marks it abandoned, whichever comes first.
const (
	execRunning int32 = iota
	execReturned
	execAbandoned
)

// execution is one attempt in progress, as the watchdog sees it.
type execution struct {
	ctx   context.Context
	state atomic.Int32
	// endedAt is when the watchdog first saw ctx ended; only the watchdog
	// goroutine touches it.
	endedAt time.Time
	// d is the delivery the attempt is of: abandoning stops its heartbeats
	// and frees its slot.
	d *delivery
	// rep is the attempt's reporter: abandoning closes it, so that the
	// execution running on publishes nothing more.
	rep *reporter
}

// slot is a call's place in its pool: released once, by the handler when
// it returns or by the watchdog when it abandons the execution.
type slot struct {
	released atomic.Bool
	free     func()
}

func (s *slot) release() {
	if s.released.CompareAndSwap(false, true) {
		s.free()
	}
}

// watchdog visits the running calls until done is closed.
func (w *Worker) watchdog(done <-chan struct{}) {
	t := time.NewTicker(max(w.cfg.Watchdog/4, time.Millisecond))
	defer t.Stop()
	var stuck []*execution
	for {
		select {
		case <-done:
			return
		case <-t.C:
			// The time of the visit, not the tick's: a tick delivered late
			// carries its scheduled time, which would date an execution's
			// end too early and cut its grace short.
			stuck = w.cancels.overdue(time.Now(), w.cfg.Watchdog, stuck[:0])
			for _, ex := range stuck {
				w.abandon(ex)
			}
			clear(stuck)
		}
	}
}

// overdue appends the executions whose context ended at least watchdog
// ago, marking them abandoned.
func (c *cancels) overdue(now time.Time, watchdog time.Duration, out []*execution) []*execution {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.fns {
		for ; r != nil; r = r.next {
			ex := r.exec.Load()
			if ex == nil || ex.ctx.Err() == nil {
				continue
			}
			if ex.endedAt.IsZero() {
				ex.endedAt = now
				continue
			}
			if now.Sub(ex.endedAt) >= watchdog && ex.state.CompareAndSwap(execRunning, execAbandoned) {
				out = append(out, ex)
			}
		}
	}
	return out
}

// abandon gives up on an execution that ignores its context: no more
// heartbeats, so the call moves on after AckWait; the handler never
// settles it.
func (w *Worker) abandon(ex *execution) {
	d := ex.d
	d.pool.hb.remove(d.msg)
	if ex.rep != nil {
		ex.rep.close()
	}
	w.stats.abandoned.Add(1)
	w.stats.abandonedRunning.Add(1)
	d.log().Error("execution ignored its context past the watchdog; abandoned for redelivery", "watchdog", w.cfg.Watchdog)
	d.slot.release()
}
