package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/failpoint"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// verb says how an outcome settles the delivered message.
type verb uint8

const (
	// undecided: no outcome yet; the call goes on to its next step.
	undecided verb = iota
	// verbLeave settles nothing: the watchdog abandoned the execution, or
	// another delivery started the attempt first. JetStream redelivers the
	// message after AckWait.
	verbLeave
	// verbAck publishes the answer (resp), if any, as the call's one
	// result, then acks; a failed publish naks after a second instead.
	// With a reason, the call is dead-lettered first (attempts
	// exhausted).
	verbAck
	// verbNak naks with delay: the worker stopped while a lookup failed
	// (hold.go), or the call is not served here.
	verbNak
	// verbHandBack naks with delay (none: at once): the call did not run
	// to an answer here. On the last delivery JetStream allows, it is
	// answered MAX_ATTEMPTS with its last error (err) instead.
	verbHandBack
	// verbTerm refuses the call: err answers it (redacted first), it is
	// dead-lettered and terminated. A call not to be answered (no call)
	// is dead-lettered raw with reason and terminated.
	verbTerm
	// verbSchedule parks the call as a message schedule for delay in the
	// retries stream and acks it (retry.go); unwritten, it is handed back
	// with the delay.
	verbSchedule
)

// outcome is what a step decided about the call: a verb and what it
// needs. The zero outcome decides nothing.
type outcome struct {
	verb  verb
	resp  *toolwirev1.ToolResponse
	err   *toolwirev1.ToolError
	delay time.Duration
	// reason dead-letters the call (verbAck, verbTerm).
	reason string
}

// decided reports whether o settles the call.
func (o outcome) decided() bool { return o.verb != undecided }

func leave() outcome       { return outcome{verb: verbLeave} }
func acknowledge() outcome { return outcome{verb: verbAck} }

func answer(resp *toolwirev1.ToolResponse) outcome { return outcome{verb: verbAck, resp: resp} }

func retryLater(delay time.Duration) outcome { return outcome{verb: verbNak, delay: delay} }

func handBack(delay time.Duration, last *toolwirev1.ToolError) outcome {
	return outcome{verb: verbHandBack, delay: delay, err: last}
}

func refusal(te *toolwirev1.ToolError) outcome { return outcome{verb: verbTerm, err: te} }

// terminate ends a call that is not to be answered: dead-lettered raw with
// reason and te (if any), and terminated.
func terminate(reason string, te *toolwirev1.ToolError) outcome {
	return outcome{verb: verbTerm, reason: reason, err: te}
}

func park(delay time.Duration, last *toolwirev1.ToolError) outcome {
	return outcome{verb: verbSchedule, delay: delay, err: last}
}

// exhausted ends a call whose attempts are spent: a MAX_ATTEMPTS answer
// carrying the last error, and a dead letter.
func (d *delivery) exhausted(last *toolwirev1.ToolError) outcome {
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS,
		Message:            fmt.Sprintf("gave up after attempt %d: %s: %s", d.call.Attempt, last.GetType(), last.GetMessage()),
		PartialSideEffects: last.GetPartialSideEffects(), Suggestion: last.GetSuggestion()}
	if te.PartialSideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED {
		te.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	return outcome{verb: verbAck, resp: d.errorResponse(te), err: last, reason: "attempts exhausted"}
}

// settle carries out o. Acks therefore only ever settle a call that has
// its one result.
func (d *delivery) settle(o outcome) {
	switch o.verb {
	case verbLeave:
	case verbAck:
		if o.reason != "" {
			d.deadLetter(d.ctx, o.reason, o.err)
		}
		if o.resp == nil {
			d.settled("ack", d.msg.Ack())
			return
		}
		d.finish(o.resp)
	case verbNak:
		d.settled("nak", d.msg.NakWithDelay(o.delay))
	case verbHandBack:
		d.handBack(o.delay, o.err)
	case verbTerm:
		if d.call == nil {
			d.deadLetter(d.ctx, o.reason, o.err)
			d.settled("term", d.msg.TermWithReason(o.reason))
			return
		}
		d.refuse(o.err)
	case verbSchedule:
		d.park(o.delay, o.err)
	default: // a step returned no outcome: never leave the call hanging
		d.w.log.ErrorContext(d.ctx, "call left undecided; redelivering", "subject", d.msg.Subject())
		d.settled("nak", d.msg.NakWithDelay(time.Second))
	}
}

// finish publishes the terminal response once and then acknowledges.
func (d *delivery) finish(resp *toolwirev1.ToolResponse) {
	d.w.secretsOf(d.call).Response(resp) // before it is stored, inline or as a blob
	resp = d.afterHooks(resp)            // after the redaction: hooks never see secrets
	failpoint.Inject("before-result-publish")
	err := d.publishHeld(resp)
	failpoint.Inject("after-result-publish")
	switch {
	case err == nil:
	case bus.IsWrongLastSequence(err):
		d.keepStored(resp)
	default:
		d.log().Error("publish result failed; redelivering", "err", err)
		d.settled("nak", d.msg.NakWithDelay(time.Second))
		return
	}
	d.settled("ack", d.msg.Ack())
}

// resultHold is the least time a delivery keeps publishing a result it
// holds while the results stream does not store it. After its leader
// failed, a stream answers nothing until a new leader is elected: 4–9 s
// in the fault tests of issue 26, 11.5 s the longest seen, while a
// publish that meets no responders fails within half a second (nats.go
// tries three times, 250 ms apart). 30 s covers the longest election
// seen more than twice over. Past it the delivery keeps trying while the
// call's schedule-to-close deadline has not passed: a result stored late
// is still the call's true answer, and a call handed back instead would
// be answered UNKNOWN_OUTCOME (a tool that is not safe to rerun) or run
// again. It gives up at once when the worker's grace period ends.
const resultHold = 30 * time.Second

// publishHeld publishes the call's result, trying again with backoff
// (holdRetryMin doubling to holdRetryMax; each try bounded by
// settleTimeout; the call's heartbeats go on) for resultHold, and beyond
// it until the call's deadline (see resultHold). A result already stored
// ends it: the error then says WrongLastSequence, also when the stored
// one is this delivery's own, stored by an earlier try whose
// acknowledgement was lost.
func (d *delivery) publishHeld(resp *toolwirev1.ToolResponse) error {
	until := time.Now().Add(resultHold)
	if dl := d.call.GetDeadline(); dl != nil && dl.AsTime().After(until) {
		until = dl.AsTime()
	}
	delay := holdRetryMin
	for try := 1; ; try++ {
		ctx, cancel := d.w.settleContext(d.ctx)
		err := d.w.publishResult(ctx, d.call, resp)
		cancel()
		if err == nil || bus.IsWrongLastSequence(err) {
			if try > 1 {
				d.log().Info("result published after holding the call", "tries", try)
			}
			return err
		}
		if time.Now().Add(delay).After(until) {
			return err
		}
		d.w.stats.held.Add(1)
		if try == 1 {
			d.log().Warn("publish result failed; holding the call and trying again", "err", err)
		}
		if !d.w.sleep(delay) {
			return err
		}
		delay = min(2*delay, holdRetryMax)
	}
}

// keepStored keeps the result the results stream already holds for the
// call, and says whose it is: this delivery's own (a try whose
// acknowledgement was lost stored it) or another's (a delivery that went
// stale, or a dispatcher's answer to an overdue call). Either way it is
// the call's one result, and the delivery is acknowledged.
func (d *delivery) keepStored(resp *toolwirev1.ToolResponse) {
	ctx, cancel := context.WithTimeout(d.ctx, settleTimeout)
	defer cancel()
	s, err := d.w.answers().Read(ctx, d.w.resultSubject(d.call), d.call.Tool)
	if err == nil && s == nil {
		err = errors.New("no believed result found")
	}
	stored := s.GetResp()
	switch sm, om := stored.GetMeta(), resp.GetMeta(); {
	case err != nil:
		d.log().Info("a result was already published; keeping it", "read_err", err)
	case sm.GetWorker() == om.GetWorker() && sm.GetAttempt() == om.GetAttempt() && sm.GetStartedAt().AsTime().Equal(om.GetStartedAt().AsTime()):
		d.log().Info("this delivery's result was stored by an earlier try; keeping it")
	default:
		d.log().Info("another result was published first; keeping it", "worker", sm.GetWorker(), "attempt", sm.GetAttempt(), "ok", stored.GetOk())
	}
}

// refuse answers a call that must not run: an error response, a dead
// letter, and Term so it is never redelivered.
func (d *delivery) refuse(te *toolwirev1.ToolError) {
	d.w.secretsOf(d.call).ToolError(te) // before the log line and the term reason
	d.log().Warn("refusing call", "reason", te.Message)
	now := time.Now()
	resp := envelope.Error(d.call.CallId, d.call.Tool, te, d.answerMeta(nil, now, now))
	if err := d.publishHeld(resp); err != nil && !bus.IsWrongLastSequence(err) {
		d.log().Error("publish refusal failed; redelivering", "err", err)
		d.settled("nak", d.msg.NakWithDelay(time.Second))
		return
	}
	d.deadLetter(d.ctx, te.Message, te) // bounded there
	d.settled("term", d.msg.TermWithReason(te.Message))
}

// handBack returns the call to the stream for another delivery after
// delay — unless this was the last delivery JetStream allows, in which
// case the call ends here with MAX_ATTEMPTS.
func (d *delivery) handBack(delay time.Duration, last *toolwirev1.ToolError) {
	if md, err := d.msg.Metadata(); err == nil && d.pool.MaxDeliver > 0 && md.NumDelivered >= uint64(d.pool.MaxDeliver) {
		d.started = time.Now()
		d.finished = d.started
		d.settle(d.exhausted(last))
		return
	}
	if delay <= 0 {
		d.log().Info("handing call back")
		d.settled("nak", d.msg.Nak())
		return
	}
	d.settled("nak", d.msg.NakWithDelay(delay))
}

// settled logs and counts a failed ack, nak or term (verb): a lost ack is
// a duplicate execution later.
func (d *delivery) settled(verb string, err error) {
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		d.w.metrics.SettleError(verb)
		d.w.log.ErrorContext(d.ctx, "settling call failed", "verb", verb, "subject", d.msg.Subject(), "err", err)
	}
}

// deadLetter records the call (raw when it is not to be answered) in the
// dead-letter stream with reason and its last error te.
func (d *delivery) deadLetter(ctx context.Context, reason string, te *toolwirev1.ToolError) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	w, call, msg := d.w, d.call, d.msg
	if sec := w.secretsOf(call); sec != nil {
		reason = sec.String(reason)
		sec.ToolError(te)
	}
	attempts := d.count
	if call != nil {
		attempts = call.Attempt
	}
	dl := &toolwirev1.DeadLetter{Call: call, Subject: msg.Subject(), Reason: reason, LastError: te,
		Attempts: attempts, Time: timestamppb.Now(), Worker: w.cfg.Name}
	subj := w.bus.Subjects.DLQ(d.pool.Type, "_unknown", "_unknown", "_unknown")
	if call == nil {
		dl.Raw = msg.Data()
	} else {
		subj = w.bus.Subjects.DLQ(d.pool.Type, call.GetCaller().GetTenant(), call.Provider, call.Tool)
	}
	data, err := proto.Marshal(dl)
	if err == nil {
		_, err = w.bus.JS.Publish(ctx, subj, data)
	}
	if err != nil {
		w.log.ErrorContext(ctx, "dead letter not written", "subject", msg.Subject(), "err", err)
	}
}

func (w *Worker) resultSubject(call *toolwirev1.ToolCall) string {
	return w.bus.Subjects.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
}

// publishResultNow publishes resp as the call's one result (publishResult
// is this, observed) with ExpectLastSequencePerSubject(0), so the server
// refuses a second result for the same call.
func (w *Worker) publishResultNow(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
	data, err := w.fitInline(ctx, call, resp)
	if err != nil {
		return err
	}
	msg := w.bus.Signer.SignedMsg(w.resultSubject(call), signing.KindResult, call.CallId, resp.GetMeta().GetAttempt(), data, nil)
	_, err = w.answers().Publish(ctx, msg, call.Tool)
	return err
}

// answers reads and stores calls' believed results (internal/believed).
func (w *Worker) answers() believed.Reader {
	return believed.Reader{JS: w.bus.JS, Stream: w.bus.Results, Keys: w.bus.Keys, OnRefused: w.refusedResult}
}

// refusedResult logs a result found on a call's subject and not believed.
func (w *Worker) refusedResult(r believed.Refused) {
	w.log.Warn("a result that is not believed is stored for a call; it is not the call's answer",
		"subject", r.Subject, "seq", r.Sequence, "problem", r.Err.Problem, "err", r.Err)
}

// settleTimeout bounds each server step of handling a call: a lookup,
// publishing a result, a dead letter or an event.
const settleTimeout = 10 * time.Second

// settleContext returns ctx bounded by settleTimeout for one server step.
// A ctx that carries nothing (tracing off) gets a context shared by every
// call: its deadline is settleTimeout to settleTimeout+settleRenew away
// (it is replaced when older than settleRenew), so a fast call's steps
// need no deadline context and timer of their own. A shared context is
// never cancelled early: it ends with its deadline.
func (w *Worker) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx != context.Background() {
		return context.WithTimeout(ctx, settleTimeout)
	}
	now := time.Now()
	sh := w.settleShared.Load()
	if sh == nil || now.After(sh.renew) {
		next := &sharedSettle{renew: now.Add(settleRenew)}
		next.ctx, next.cancel = context.WithTimeout(context.Background(), settleTimeout+settleRenew)
		if w.settleShared.CompareAndSwap(sh, next) {
			sh = next
		} else {
			next.cancel()
			sh = w.settleShared.Load()
		}
	}
	return sh.ctx, noCancel
}

// settleRenew is how long a shared settle context is handed out.
const settleRenew = time.Second

type sharedSettle struct {
	ctx context.Context
	// cancel is called only by Stop: replaced contexts end with their
	// deadline, since calls may still be using them.
	cancel context.CancelFunc
	renew  time.Time
}

func noCancel() {}
