package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
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

// awaitEarlierResult holds a redelivery that found an attempt another
// worker started (or reported progress on) without a result, while that
// worker may still store the result: a delivery keeps publishing a
// computed result for resultHold, and a pool consumer's new leader
// redelivers calls delivered more than AckWait before although their
// first delivery lives. Until prev's time plus resultHold plus AckWait
// (and never past the call's deadline) it looks for the result every
// second or so: found, the redelivery is acknowledged. Then it reads the
// last attempt event again (the earlier delivery may have noted that the
// attempt did not run) and leaves the decision to gate. The worker's
// stop hands the call back.
func (d *delivery) awaitEarlierResult() outcome {
	prev := d.prev
	if prev.GetTime() == nil || prev.Worker == d.w.cfg.Name ||
		(prev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED && prev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS) {
		return outcome{}
	}
	until := prev.Time.AsTime().Add(resultHold + d.pool.AckWait)
	if dl := d.call.GetDeadline(); dl != nil && dl.AsTime().Before(until) {
		until = dl.AsTime()
	}
	if !time.Now().Before(until) {
		return outcome{}
	}
	d.w.stats.awaited.Add(1)
	d.log().Info("an earlier attempt started without a result; waiting for the result it may still store",
		"attempt", prev.Attempt, "worker", prev.Worker, "until", until)
	w, delay := d.w, holdRetryMin
	for left := time.Until(until); left > 0; left = time.Until(until) {
		if !w.sleep(min(delay, left)) {
			return retryLater(time.Second)
		}
		delay = min(2*delay, time.Second)
		ctx, cancel := context.WithTimeout(d.ctx, settleTimeout)
		s, err := w.answers().Read(ctx, w.resultSubject(d.call), d.call.Tool)
		cancel()
		if err == nil && s != nil {
			d.log().Info("the earlier attempt's result was stored; acknowledging redelivery")
			return acknowledge()
		}
	}
	ctx, cancel := context.WithTimeout(d.ctx, settleTimeout)
	defer cancel()
	if ev, err := w.lastEvent(ctx, d.call); err == nil && ev != nil {
		d.prev = ev
	}
	d.started = time.Now()
	d.finished = d.started
	return outcome{}
}
