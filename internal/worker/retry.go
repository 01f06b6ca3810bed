package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// attempts runs the call's attempts, numbered on from the last one an
// earlier delivery reached, until one decides the outcome. A failed
// attempt runs again after a backoff while the retry policy allows it
// (retryable, attempts left, time left before the call's deadline);
// RATE_LIMIT spends no attempt.
func (d *delivery) attempts() outcome {
	rp := policyOf(d.spec)
	var bo interface{ NextBackOff() time.Duration } // built on the first retry
	base := max(d.prev.GetAttempt(), d.carried)
	spent := int(base)
	for try := int32(1); ; try++ {
		d.call.Attempt = base + try
		o, failed := d.attempt()
		if failed == nil {
			return o
		}
		te := failed.Proto()
		if te.Type != toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT {
			spent++
		}
		if !rp.retryable(d.spec, te) {
			resp := d.errorResponse(te)
			resp.Content, resp.StructuredJson, resp.MetaJson = failed.Content, string(failed.Structured), string(failed.Meta)
			return answer(resp)
		}
		if spent >= rp.maxAttempts {
			return d.exhausted(te)
		}
		if bo == nil {
			bo = rp.backoff()
		}
		delay := bo.NextBackOff()
		if ra := te.RetryAfter.AsDuration(); ra > delay {
			delay = ra
		}
		if o := d.retry(te, delay); o.decided() {
			return o
		}
		if o := d.checkPolicy(te); o.decided() {
			return o
		}
	}
}

// retry records that the call runs again after delay (a RETRYING event)
// and waits for it, unless no time is left before the call's deadline,
// or the delay is longer than MaxInProcessDelay (the call is parked as a
// message schedule, holding no consumer slot meanwhile), or the call is
// cancelled or shut down while it waits.
func (d *delivery) retry(te *toolwirev1.ToolError, delay time.Duration) outcome {
	if dl := d.call.Deadline; dl != nil && time.Now().Add(delay).After(dl.AsTime()) {
		te.Message += " (no time left before the call's deadline to retry)"
		return answer(d.errorResponse(te))
	}
	d.w.stats.retries.Add(1)
	recorded := d.w.attemptEvent(d.ctx, d.call, d.spec, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING,
		Message: te.Message, Error: te, RetryDelay: durationpb.New(delay)}) == nil
	// The delivery that takes a parked call reads this RETRYING event to
	// know that a tool that is not safe to rerun may run again; not
	// stored, the retry waits here instead (the next attempt's STARTED
	// record supersedes the last one).
	if delay > d.w.cfg.MaxInProcessDelay && !d.w.cfg.Shadow && recorded {
		return park(delay, te)
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
		return outcome{}
	case <-d.callCtx.Done():
		t.Stop()
	}
	// Cancelled or shut down while waiting: no attempt is running.
	var ce *CancelledError
	if errors.As(context.Cause(d.callCtx), &ce) {
		d.started = time.Now()
		d.finished = d.started
		return answer(d.cancelled(ce, "", te.PartialSideEffects))
	}
	return handBack(0, te)
}

// park parks a call for a long retry delay as a message schedule in the
// retries stream and acknowledges it, so it holds no consumer slot while
// it waits; the dispatchers' mover puts it back on the calls stream when
// the schedule fires. If the schedule cannot be written, the call is
// handed back with NakWithDelay instead.
func (d *delivery) park(delay time.Duration, last *toolwirev1.ToolError) {
	sctx, cancel := context.WithTimeout(d.ctx, settleTimeout)
	defer cancel()
	call := d.call
	data, err := proto.Marshal(call) // carries the attempt it reached
	if err == nil {
		at := time.Now().Add(delay)
		if at.Truncate(time.Second) != at { // schedules have one-second resolution: never early
			at = at.Truncate(time.Second).Add(time.Second)
		}
		_, err = d.w.bus.JS.PublishMsg(sctx, &nats.Msg{Subject: d.w.bus.Subjects.RetrySchedule(call.CallId, call.Attempt), Data: data,
			Header: d.scheduleHeader()},
			jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(d.w.bus.Subjects.RetryDue(call.CallId, call.Attempt)),
			jetstream.WithMsgID(fmt.Sprintf("retry-%s-%d", call.CallId, call.Attempt)))
	}
	if err != nil {
		d.log().Warn("retry schedule not written; handing back with a delay", "err", err)
		d.handBack(delay, last)
		return
	}
	d.settled("ack", d.msg.Ack())
}

// scheduleHeader is the header of a retry schedule: the delivery's trace
// context (none with tracing off), which the server copies onto the due
// message and the mover onto the call it puts back; and the delivery it
// retries, which the mover checks the call against (bus.RetryOfHeader).
func (d *delivery) scheduleHeader() nats.Header {
	hdr := telemetry.Inject(d.ctx, nil)
	if md, err := d.msg.Metadata(); err == nil {
		if hdr == nil {
			hdr = nats.Header{}
		}
		hdr.Set(bus.RetryOfHeader, strconv.FormatUint(md.Sequence.Stream, 10))
	}
	return hdr
}

// Retry defaults, used where a tool's RetryPolicy leaves a field zero.
const (
	DefaultMaxAttempts     = 3
	DefaultInitialInterval = 200 * time.Millisecond
	DefaultMaxInterval     = 30 * time.Second
	DefaultMultiplier      = 2.0
	DefaultJitter          = 0.2
)

type retryPolicy struct {
	maxAttempts  int
	initial      time.Duration
	maxInterval  time.Duration
	multiplier   float64
	jitter       float64
	nonRetryable []toolwirev1.ErrorType
}

func policyOf(spec *toolwirev1.ToolSpec) retryPolicy {
	p := spec.GetRetry()
	rp := retryPolicy{maxAttempts: DefaultMaxAttempts, initial: DefaultInitialInterval, maxInterval: DefaultMaxInterval,
		multiplier: DefaultMultiplier, jitter: DefaultJitter, nonRetryable: p.GetNonRetryable()}
	if p == nil {
		return rp
	}
	if p.MaxAttempts > 0 {
		rp.maxAttempts = int(p.MaxAttempts)
	}
	if d := p.InitialInterval.AsDuration(); d > 0 {
		rp.initial = d
	}
	if d := p.MaxInterval.AsDuration(); d > 0 {
		rp.maxInterval = d
	}
	if p.Multiplier >= 1 {
		rp.multiplier = p.Multiplier
	}
	if p.Jitter > 0 && p.Jitter <= 1 {
		rp.jitter = p.Jitter
	}
	return rp
}

func (rp retryPolicy) backoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = rp.initial, rp.maxInterval, rp.multiplier, rp.jitter
	b.MaxElapsedTime = 0 // bounded by attempts and the call deadline instead
	b.Reset()
	return b
}

// safeToRerun reports whether running the tool again cannot duplicate a
// side effect: it is read-only or idempotent.
func safeToRerun(spec *toolwirev1.ToolSpec) bool {
	a := spec.GetAnnotations()
	return a.GetReadOnly() || a.GetIdempotent()
}

// retryable decides whether an attempt that failed with te may run again:
// the error says retryable, the policy does not exclude its type, and a
// rerun cannot duplicate effects (the tool is safe to rerun, or the error
// reports no partial side effects).
func (rp retryPolicy) retryable(spec *toolwirev1.ToolSpec, te *toolwirev1.ToolError) bool {
	if !te.Retryable || slices.Contains(rp.nonRetryable, te.Type) {
		return false
	}
	switch te.Type {
	case toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED,
		toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME:
		return false
	}
	return safeToRerun(spec) || te.PartialSideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
}
