package worker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Holding a call while the server does not answer. A delivery whose
// lookups, STARTED record or claim read-back fail does not hand its call
// back: a nak would spend one of the deliveries the pool's MaxDeliver
// allows the tool (issue 26: during a partition 41 accepted calls spent
// all five on failed lookups and were dropped). It keeps the message —
// its heartbeats (InProgress every AckWait/3) go on, as during an
// execution — and tries the step again after holdRetryMin, doubling to
// holdRetryMax, until the step succeeds, the call's schedule-to-close
// deadline passes (the expiry answer), or the worker's grace period ends
// (the call is handed back, as at shutdown).
//
// When the worker's own connection is cut, its heartbeats do not reach
// the server either: AckWait passes and JetStream hands the call to
// another worker, as after a crash. The held delivery is then stale, but
// it never acts on stale information: what it learns once the server
// answers again is read then (the result, the last attempt event), and
// a tool that is not safe to rerun runs only on a STARTED claim checked
// against every other delivery's (claimStart).
const (
	holdRetryMin = 250 * time.Millisecond
	holdRetryMax = 5 * time.Second
)

var (
	// errStopping says the worker's grace period ended while a delivery
	// held its call.
	errStopping = errors.New("worker: stopping")
	// errDeadline says the call's schedule-to-close deadline passed while
	// a delivery held it.
	errDeadline = errors.New("worker: the call's deadline passed")
)

// persist runs step until it succeeds, holding the call meanwhile (see
// above). It returns nil once step has, or errStopping or errDeadline
// (with step's last error). A caller's cancel does not end it: the
// answer to a cancel needs what the step reads. what names the step in
// the log.
func (d *delivery) persist(what string, step func() error) error {
	delay := holdRetryMin
	held := time.Now()
	for try := 1; ; try++ {
		err := step()
		if err == nil {
			if try > 1 {
				d.log().Info(what+" succeeded after holding the call", "tries", try, "held", time.Since(held).Round(time.Millisecond))
			}
			return nil
		}
		d.w.stats.held.Add(1)
		if try == 1 {
			d.log().Warn(what+" failed; holding the call and trying again", "err", err)
		} else {
			d.log().Debug(what+" failed again", "err", err, "try", try)
		}
		if werr := d.pause(delay); werr != nil {
			d.log().Warn(what+" failed; giving up holding the call", "err", err, "why", werr, "tries", try)
			return fmt.Errorf("%w: %s: %w", werr, what, err)
		}
		delay = min(2*delay, holdRetryMax)
	}
}

// pause waits delay, or less: errStopping when the worker's grace period
// ends first, errDeadline when the call's schedule-to-close deadline
// does.
func (d *delivery) pause(delay time.Duration) error {
	atDeadline := false
	if dl := d.call.GetDeadline(); dl != nil {
		left := time.Until(dl.AsTime())
		if left <= 0 {
			return errDeadline
		}
		if left <= delay {
			delay, atDeadline = left, true
		}
	}
	if !d.w.sleep(delay) {
		return errStopping
	}
	if atDeadline {
		return errDeadline
	}
	return nil
}

// sleep waits delay; false if the worker's grace period ended first.
func (w *Worker) sleep(delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.cancels.stopping():
		return false
	}
}

// heldOutcome decides a call whose delivery gave up holding it while
// looking (err from persist): handed back at shutdown, as before the
// lookups held (a nak, 1s); past its deadline, the expiry answer.
func (d *delivery) heldOutcome(err error) outcome {
	if errors.Is(err, errDeadline) {
		return d.expired()
	}
	return retryLater(time.Second)
}

// lookup is one lookup step of persist, bounded by settleTimeout.
func (d *delivery) lookup(fn func(ctx context.Context) error) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(d.ctx, settleTimeout)
		defer cancel()
		return fn(ctx)
	}
}
