package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/failpoint"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/lazy"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

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

// handle runs one delivered call to a settled message: every path ends in
// an ack, a nak or a term, and every settle error is logged. The one
// exception is an execution that ignores its context past the watchdog: it
// is abandoned unsettled and without heartbeats, so JetStream redelivers it
// after AckWait.
//
// ctx carries only values (the delivery's span), never a deadline or a
// cancellation: each step that talks to the server bounds itself
// (settleTimeout), since a deadline for the whole call would expire under
// long executions. delivery is the message's delivery count.
func (w *Worker) handle(ctx context.Context, p Pool, msg jetstream.Msg, delivery int32, sl *slot) {
	failpoint.Inject("after-fetch")

	call, err := DecodeCall(w.bus.Subjects, p.Type, msg.Subject(), msg.Data())
	var bad *BadCallError
	switch {
	case errors.As(err, &bad) && call == nil:
		w.log.WarnContext(ctx, "terminating call", "subject", msg.Subject(), "reason", bad.Reason)
		w.deadLetter(ctx, p.Type, nil, msg, bad.Reason, nil, delivery)
		w.settle(ctx, msg, "term", msg.TermWithReason(bad.Reason))
		return
	case errors.As(err, &bad) && !w.sameTenant(msg.Subject(), call):
		// The payload names another tenant than its subject, or a tenant
		// that is no valid name: answering would write a result into a
		// tenant's namespace on a stranger's word (or under a mapped
		// name). A call whose tenant is no valid name is dead-lettered
		// raw, under no tenant, rather than under a mapped one.
		w.log.WarnContext(ctx, "terminating call whose tenant cannot be answered", "subject", msg.Subject(), "reason", bad.Reason)
		// Raw (no call) in every case: a letter keeping the call would let
		// `dlq retry` queue it for the payload's tenant on that stranger's
		// word, as the reaper and the orphan sweeper also never do.
		w.deadLetter(ctx, p.Type, nil, msg, bad.Reason, preExecError(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, bad.Reason), delivery)
		w.settle(ctx, msg, "term", msg.TermWithReason(bad.Reason))
		return
	case errors.As(err, &bad):
		call.Attempt = delivery
		w.refuse(ctx, p, msg, call, callLog{ctx, w, call, delivery}, preExecError(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, bad.Reason))
		return
	}
	// A call put back on the stream after a scheduled retry carries the
	// attempt it reached; it is handled like a redelivery.
	carried := call.Attempt
	rescheduled := carried > 0
	call.Attempt = delivery
	log := callLog{ctx, w, call, delivery}
	w.annotateDelivery(ctx, call)

	// A tool or version this replica does not serve may be served by
	// another replica of the pool (a rolling upgrade): hand it back, and
	// refuse it only on the last delivery.
	ent, ok := (*w.specs.Load())[call.Tool]
	if !ok {
		w.notServed(ctx, p, msg, call, log, preExecError(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			fmt.Sprintf("no worker of pool %s serves tool %q", p.Name, call.Tool)))
		return
	}
	spec := ent.Spec
	if call.SpecVersion != "" && call.SpecVersion != spec.Version {
		w.notServed(ctx, p, msg, call, log, preExecError(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			fmt.Sprintf("unknown spec version %q of tool %q (this worker serves %q)", call.SpecVersion, call.Tool, spec.Version)))
		return
	}
	// What admission checked, checked again: a call can arrive without
	// passing a dispatcher (args.go).
	if te := checkArgs(call.Arguments, ent, w.cfg); te != nil {
		w.refuse(ctx, p, msg, call, log, te)
		return
	}
	if te := policy.CheckApproval(ctx, spec, call); te != nil {
		w.refuse(ctx, p, msg, call, log, te)
		return
	}

	p.hb.add(msg)
	defer p.hb.remove(msg)

	// Register for cancellation first, then look for a tombstone: a cancel
	// arriving in between still reaches the call.
	// Not a child of a worker-wide context: a shared parent would take a
	// lock and a map update per call. Shutdown reaches the call through
	// the same registry that cancels reach it through.
	// ctx only adds values to context.Background(), so this is still a
	// root for cancellation: no parent to propagate from, no lock.
	callCtx, cancelCall := context.WithCancelCause(ctx)
	defer cancelCall(nil)
	seen, reg := w.cancels.register(bus.CancelKey(call.Caller.Tenant, call.CallId), cancelCall)
	defer w.cancels.unregister(reg)

	var prev *toolwirev1.CallEvent
	if delivery > 1 || rescheduled {
		// A redelivered call may already have its result: answer from it.
		// Read from the leader: a replica that lags would say none.
		lctx, cancel := context.WithTimeout(ctx, settleTimeout)
		_, err := bus.LastMsgFromLeader(lctx, w.bus.JS, w.bus.Results, w.resultSubject(call))
		if err == nil {
			cancel()
			log.Debug("result already published; acknowledging redelivery")
			w.settle(ctx, msg, "ack", msg.Ack())
			return
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			cancel()
			log.Warn("result lookup failed; redelivering", "err", err)
			w.settle(ctx, msg, "nak", msg.NakWithDelay(time.Second))
			return
		}
		prev, err = w.lastEvent(lctx, call)
		cancel()
		if err != nil {
			log.Warn("event lookup failed; redelivering", "err", err)
			w.settle(ctx, msg, "nak", msg.NakWithDelay(time.Second))
			return
		}
	}
	now := time.Now()
	ts := seen
	if ts == nil && (delivery > 1 || rescheduled || w.cancels.lookupNeeded(call.AcceptedAt.AsTime(), now, w.bus.NC.Stats().Reconnects)) {
		lctx, cancel := context.WithTimeout(ctx, settleTimeout)
		var err error
		ts, err = w.tombstone(lctx, call.Caller.Tenant, call.CallId)
		cancel()
		if err != nil {
			log.Warn("cancel lookup failed; redelivering", "err", err)
			w.settle(ctx, msg, "nak", msg.NakWithDelay(time.Second))
			return
		}
	}
	if ts != nil {
		fx := toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
		if unknownOutcome(prev) {
			fx = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
		}
		resp := w.errorResponse(call, spec, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED,
			Message: (&CancelledError{*ts}).Error() + " before it started", PartialSideEffects: fx}, now, now)
		resp.Meta.CancelledBy, resp.Meta.CancelReason = ts.By, ts.Reason
		w.finish(ctx, msg, call, log, resp)
		return
	}
	if unknownOutcome(prev) && !safeToRerun(spec) {
		w.stats.unknownOutcomes.Add(1)
		w.finish(ctx, msg, call, log, w.errorResponse(call, spec, &toolwirev1.ToolError{
			Type:               toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME,
			Message:            fmt.Sprintf("attempt %d started and ended without a result; the tool is not idempotent, so it is not run again", prev.Attempt),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
			Suggestion:         "check the tool's target for the effect before calling again"}, now, now))
		return
	}
	if dl := call.ScheduleToStartDeadline; dl != nil && now.After(dl.AsTime()) && prev == nil {
		w.finish(ctx, msg, call, log, w.errorResponse(call, spec, preExecError(toolwirev1.ErrorType_ERROR_TYPE_EXPIRED,
			fmt.Sprintf("not started within its schedule-to-start deadline (%s late); never executed", now.Sub(dl.AsTime()).Round(time.Millisecond))), now, now))
		return
	}
	if dl := call.Deadline; dl != nil && now.After(dl.AsTime()) {
		te := preExecError(toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, "schedule-to-close deadline passed before the call started; never executed")
		if prev != nil {
			te = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Message: "schedule-to-close deadline passed",
				PartialSideEffects: sideEffectsOf(prev)}
		}
		w.finish(ctx, msg, call, log, w.errorResponse(call, spec, te, now, now))
		return
	}

	rp := policyOf(spec)
	var bo interface{ NextBackOff() time.Duration } // built on the first retry
	base := max(prev.GetAttempt(), carried)
	spent := int(base)
	for try := int32(1); ; try++ {
		call.Attempt = base + try
		started := time.Now()
		// A cancel or shutdown that arrived after the checks above, before
		// the attempt starts: it never starts.
		if cause := context.Cause(callCtx); cause != nil {
			var ce *CancelledError
			if errors.As(cause, &ce) {
				resp := w.errorResponse(call, spec, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED,
					Message: ce.Error() + " before the attempt started", PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}, started, started)
				resp.Meta.CancelledBy, resp.Meta.CancelReason = ce.By, ce.Reason
				w.finish(ctx, msg, call, log, resp)
				return
			}
			w.handBack(ctx, p, msg, call, spec, log, 0, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED,
				Message: cause.Error(), PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE})
			return
		}
		startedEv, err := w.startedEvent(ctx, call, spec)
		if errors.Is(err, errClaimLost) {
			// Another delivery runs it: leave this one unsettled
			// (durableStart).
			w.stats.claimsLost.Add(1)
			log.Warn("another delivery started this call first; leaving this delivery to it", "err", err)
			return
		}
		if errors.Is(err, errStartUnconfirmed) {
			w.stats.notStarted.Add(1)
			log.Warn("STARTED stored but not confirmed; handing the call back without running it", "err", err)
			w.handBack(ctx, p, msg, call, spec, log, notStartedDelay, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
				Retryable: true, Message: err.Error(), PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE})
			return
		}
		if err != nil {
			// No durable STARTED, no execution.
			w.notStarted(ctx, p, msg, call, spec, log, err)
			return
		}
		attemptCtx, attemptSpan := w.startAttempt(callCtx, call)
		ex := &execution{hb: p.hb, msg: msg, slot: sl, log: log}
		res, execErr, abandoned := w.execute(attemptCtx, call, spec, startedEv, reg, ex)
		endAttempt(attemptSpan, execErr, abandoned)
		startedEv.Stop()
		if abandoned {
			// The watchdog gave up on it (watchdog.go): never settle it
			// from here.
			return
		}
		finished := time.Now()
		w.executed.Add(1)
		if execErr == nil {
			if err := intents.Check(spec, res.Intents); err != nil {
				// The tool ran: its side effects happened, but its intents
				// must not reach an orchestrator.
				w.stats.badIntents.Add(1)
				log.Error("tool returned invalid intents; answering INTERNAL", "err", err)
				w.finish(ctx, msg, call, log, w.errorResponse(call, spec, &toolwirev1.ToolError{
					Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "the tool returned invalid intents: " + err.Error(),
					PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE,
				}, started, finished))
				return
			}
			w.finish(ctx, msg, call, log, w.okResponse(call, spec, res, started, finished))
			return
		}
		terr := tool.AsError(callCtx, execErr)
		te := terr.Proto()
		cause := context.Cause(callCtx)
		var ce *CancelledError
		switch {
		case errors.As(cause, &ce):
			te = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: ce.Error(),
				PartialSideEffects: cancelledSideEffects(spec, execErr)}
			resp := w.errorResponse(call, spec, te, started, finished)
			resp.Meta.CancelledBy, resp.Meta.CancelReason = ce.By, ce.Reason
			w.finish(ctx, msg, call, log, resp)
			return
		case errors.Is(cause, ErrShutdown):
			// Interrupted by our own shutdown: not a failed attempt. Hand it
			// back at once so another worker takes it, recording whether a
			// rerun is safe.
			fx := cancelledSideEffects(spec, execErr)
			// Not stored, the redelivery reads this attempt's STARTED and
			// answers UNKNOWN_OUTCOME: the safe side.
			_ = w.attemptEvent(ctx, call, spec, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING,
				Message: "handed back: worker shutting down",
				Error:   &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: ErrShutdown.Error(), PartialSideEffects: fx}})
			w.handBack(ctx, p, msg, call, spec, log, 0, te)
			return
		}
		if te.Type != toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT {
			spent++
		}
		if !rp.retryable(spec, te) {
			resp := w.errorResponse(call, spec, te, started, finished)
			resp.Content, resp.StructuredJson, resp.MetaJson = terr.Content, string(terr.Structured), string(terr.Meta)
			w.finish(ctx, msg, call, log, resp)
			return
		}
		if spent >= rp.maxAttempts {
			w.exhausted(ctx, p, msg, call, spec, log, te, started, finished)
			return
		}
		if bo == nil {
			bo = rp.backoff()
		}
		delay := bo.NextBackOff()
		if ra := te.RetryAfter.AsDuration(); ra > delay {
			delay = ra
		}
		if dl := call.Deadline; dl != nil && time.Now().Add(delay).After(dl.AsTime()) {
			te.Message += " (no time left before the call's deadline to retry)"
			w.finish(ctx, msg, call, log, w.errorResponse(call, spec, te, started, finished))
			return
		}
		w.stats.retries.Add(1)
		recorded := w.attemptEvent(ctx, call, spec, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING,
			Message: te.Message, Error: te, RetryDelay: durationpb.New(delay)}) == nil
		// The delivery that takes a parked call reads this RETRYING event
		// to know that a tool that is not safe to rerun may run again; not
		// stored, the retry waits here instead (the next attempt's STARTED
		// record supersedes the last one).
		if delay > w.cfg.MaxInProcessDelay && !w.cfg.Shadow && recorded {
			w.scheduleRetry(ctx, p, msg, call, spec, log, delay, te)
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-callCtx.Done():
			t.Stop()
			// Cancelled or shut down while waiting: no attempt is running.
			if errors.As(context.Cause(callCtx), &ce) {
				now := time.Now()
				resp := w.errorResponse(call, spec, &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED,
					Message: ce.Error(), PartialSideEffects: te.PartialSideEffects}, now, now)
				resp.Meta.CancelledBy, resp.Meta.CancelReason = ce.By, ce.Reason
				w.finish(ctx, msg, call, log, resp)
				return
			}
			w.handBack(ctx, p, msg, call, spec, log, 0, te)
			return
		}
	}
}

// notServed hands a call this replica cannot run back to the pool, and
// refuses it (answer, dead letter, term) on the last delivery.
func (w *Worker) notServed(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, log callLog, te *toolwirev1.ToolError) {
	md, err := msg.Metadata()
	if err == nil && (p.MaxDeliver < 0 || md.NumDelivered < uint64(p.MaxDeliver)) {
		log.Info("handing back a call this replica does not serve", "reason", te.Message)
		w.settle(ctx, msg, "nak", msg.NakWithDelay(w.cfg.NotServedDelay))
		return
	}
	w.refuse(ctx, p, msg, call, log, te)
}

// scheduleRetry parks a call for a long retry delay as a message schedule
// in the retries stream and acknowledges it, so it holds no consumer slot
// while it waits; the dispatchers' mover puts it back on the calls stream
// when the schedule fires. If the schedule cannot be written, the call is
// handed back with NakWithDelay instead.
func (w *Worker) scheduleRetry(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, log callLog, delay time.Duration, last *toolwirev1.ToolError) {
	sctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	data, err := proto.Marshal(call) // carries the attempt it reached
	if err == nil {
		at := time.Now().Add(delay)
		if at.Truncate(time.Second) != at { // schedules have one-second resolution: never early
			at = at.Truncate(time.Second).Add(time.Second)
		}
		// The schedule carries the delivery's trace context (none with
		// tracing off); the server copies it onto the due message and the
		// mover onto the call it puts back.
		// It names the delivery it retries: the mover checks the call
		// against the stored one (bus.RetryOfHeader).
		hdr := telemetry.Inject(ctx, nil)
		if md, merr := msg.Metadata(); merr == nil {
			if hdr == nil {
				hdr = nats.Header{}
			}
			hdr.Set(bus.RetryOfHeader, strconv.FormatUint(md.Sequence.Stream, 10))
		}
		_, err = w.bus.JS.PublishMsg(sctx, &nats.Msg{Subject: w.bus.Subjects.RetrySchedule(call.CallId, call.Attempt), Data: data,
			Header: hdr},
			jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(w.bus.Subjects.RetryDue(call.CallId, call.Attempt)),
			jetstream.WithMsgID(fmt.Sprintf("retry-%s-%d", call.CallId, call.Attempt)))
	}
	if err != nil {
		log.Warn("retry schedule not written; handing back with a delay", "err", err)
		w.handBack(ctx, p, msg, call, spec, log, delay, last)
		return
	}
	w.settle(ctx, msg, "ack", msg.Ack())
}

// handBack returns the call to the stream for another delivery after
// delay — unless this was the last delivery JetStream allows, in which
// case the call ends here with MAX_ATTEMPTS.
func (w *Worker) handBack(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, log callLog, delay time.Duration, last *toolwirev1.ToolError) {
	if md, err := msg.Metadata(); err == nil && p.MaxDeliver > 0 && md.NumDelivered >= uint64(p.MaxDeliver) {
		now := time.Now()
		w.exhausted(ctx, p, msg, call, spec, log, last, now, now)
		return
	}
	if delay <= 0 {
		log.Info("handing call back")
		w.settle(ctx, msg, "nak", msg.Nak())
		return
	}
	w.settle(ctx, msg, "nak", msg.NakWithDelay(delay))
}

// exhausted ends a call whose attempts are spent: a MAX_ATTEMPTS answer
// carrying the last error, and a dead letter.
func (w *Worker) exhausted(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, log callLog, last *toolwirev1.ToolError, started, finished time.Time) {
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS,
		Message:            fmt.Sprintf("gave up after attempt %d: %s: %s", call.Attempt, last.GetType(), last.GetMessage()),
		PartialSideEffects: last.GetPartialSideEffects(), Suggestion: last.GetSuggestion()}
	if te.PartialSideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED {
		te.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	w.deadLetter(ctx, p.Type, call, msg, "attempts exhausted", last, call.Attempt)
	w.finish(ctx, msg, call, log, w.errorResponse(call, spec, te, started, finished))
}

// unknownOutcome reports whether the last recorded event says an attempt
// started and may have had effects without leaving a result.
func unknownOutcome(prev *toolwirev1.CallEvent) bool {
	if prev == nil {
		return false
	}
	switch prev.Type {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS:
		return true
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING:
		return prev.GetError().GetPartialSideEffects() != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return false
}

func sideEffectsOf(prev *toolwirev1.CallEvent) toolwirev1.PartialSideEffects {
	if unknownOutcome(prev) {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
}

// cancelledSideEffects says what an interrupted attempt may have changed:
// what the tool reported, else nothing for read-only tools, else unknown.
func cancelledSideEffects(spec *toolwirev1.ToolSpec, err error) toolwirev1.PartialSideEffects {
	var te *tool.Error
	if errors.As(err, &te) && te.SideEffects != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED &&
		te.Type != toolwirev1.ErrorType_ERROR_TYPE_CANCELLED && te.Type != toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT {
		return te.SideEffects
	}
	if spec.GetAnnotations().GetReadOnly() {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
}

// execute runs one attempt under its timeouts on this goroutine, turning a
// panic into an INTERNAL error. abandoned is true when the watchdog gave
// up on the execution (it ran on for Watchdog after its context ended)
// before it returned; res and err are then meaningless.
func (w *Worker) execute(callCtx context.Context, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, started *lazy.Record, reg *registration, ex *execution) (res *tool.Result, err error, abandoned bool) {
	timeout := w.cfg.StartToClose
	if d := spec.GetTimeouts().GetStartToClose(); d != nil && d.AsDuration() > 0 {
		timeout = d.AsDuration()
	}
	if d := call.StartToClose; d != nil && d.AsDuration() > 0 && d.AsDuration() < timeout {
		timeout = d.AsDuration()
	}
	ctx, cancel := context.WithTimeout(callCtx, timeout)
	defer cancel()
	if dl := call.Deadline; dl != nil {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl.AsTime())
		defer c2()
	}
	rep := &reporter{w: w, call: call, started: started}
	if hbt := spec.GetTimeouts().GetHeartbeat().AsDuration(); hbt > 0 {
		var cancelHB context.CancelCauseFunc
		ctx, cancelHB = context.WithCancelCause(ctx)
		defer cancelHB(nil)
		rep.timer = time.AfterFunc(hbt, func() { cancelHB(errHeartbeatTimeout) })
		rep.every = hbt
		defer rep.timer.Stop()
	}
	ctx = tool.WithReporter(tool.WithCallInfo(ctx, tool.CallInfo{CallID: call.CallId, Tool: call.Tool, Attempt: call.Attempt, Caller: call.Caller}), rep)

	ex.ctx = ctx
	reg.begin(ex)
	res, err = w.run(ctx, call, spec)
	if !reg.end(ex) {
		return nil, nil, true
	}
	if err == nil && res == nil {
		res = &tool.Result{}
	}
	if err != nil && ctx.Err() != nil {
		err = ctxErr(ctx, err)
		if errors.Is(context.Cause(ctx), errHeartbeatTimeout) {
			err = &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Retryable: true, Cause: err,
				Message: fmt.Sprintf("no heartbeat within %s", rep.every), SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
		} else {
			err = tool.AsError(ctx, err)
		}
	}
	return res, err, false
}

// run calls the executor, turning a panic into an INTERNAL error.
func (w *Worker) run(ctx context.Context, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec) (res *tool.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			sec := w.secretsOf(call)
			w.log.ErrorContext(ctx, "executor panicked", "call_id", call.CallId, "tool", call.Tool, "panic", sec.String(fmt.Sprint(r)),
				"stack", sec.String(string(debug.Stack())))
			res, err = nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
				Message: sec.String(fmt.Sprintf("tool panicked: %v", r)), SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
		}
	}()
	return w.executors[spec.Executor].Execute(ctx, &executors.Request{Call: call, Spec: spec})
}

var errHeartbeatTimeout = errors.New("heartbeat timeout")

// reporter turns tool progress into PROGRESS events and heartbeats.
type reporter struct {
	w       *Worker
	call    *toolwirev1.ToolCall
	started *lazy.Record
	timer   *time.Timer
	every   time.Duration
}

func (r *reporter) Progress(message string, percent float64) {
	r.started.Flush() // STARTED precedes the first progress event
	if r.timer != nil {
		r.timer.Reset(r.every)
	}
	ev := &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Message: message}
	if percent >= 0 {
		ev.Percent = &percent
	}
	r.w.publishEvent(r.call, ev)
}

// refuse answers a call that must not run: an error response, a dead
// letter, and Term so it is never redelivered.
func (w *Worker) refuse(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, log callLog, te *toolwirev1.ToolError) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	w.secretsOf(call).ToolError(te) // before the log line and the term reason
	log.Warn("refusing call", "reason", te.Message)
	now := time.Now()
	resp := w.errorResponse(call, nil, te, now, now)
	if err := w.publishResult(ctx, call, resp); err != nil && !bus.IsWrongLastSequence(err) {
		log.Error("publish refusal failed; redelivering", "err", err)
		w.settle(ctx, msg, "nak", msg.NakWithDelay(time.Second))
		return
	}
	w.deadLetter(ctx, p.Type, call, msg, te.Message, te, call.Attempt)
	w.settle(ctx, msg, "term", msg.TermWithReason(te.Message))
}

// finish publishes the terminal response once and then acknowledges.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, call *toolwirev1.ToolCall, log callLog, resp *toolwirev1.ToolResponse) {
	ctx, cancel := w.settleContext(ctx)
	defer cancel()
	w.secretsOf(call).Response(resp) // before it is stored, inline or as a blob
	failpoint.Inject("before-result-publish")
	err := w.publishResult(ctx, call, resp)
	failpoint.Inject("after-result-publish")
	switch {
	case err == nil:
	case bus.IsWrongLastSequence(err):
		log.Info("a result was already published; keeping it")
	default:
		log.Error("publish result failed; redelivering", "err", err)
		w.settle(ctx, msg, "nak", msg.NakWithDelay(time.Second))
		return
	}
	w.settle(ctx, msg, "ack", msg.Ack())
}

func (w *Worker) settle(ctx context.Context, msg jetstream.Msg, verb string, err error) {
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		w.metrics.SettleError(verb)
		w.log.ErrorContext(ctx, "settling call failed", "verb", verb, "subject", msg.Subject(), "err", err)
	}
}

func (w *Worker) resultSubject(call *toolwirev1.ToolCall) string {
	return w.bus.Subjects.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
}

// publishResultNow publishes resp as the call's one result (publishResult
// is this, observed).
func (w *Worker) publishResultNow(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
	data, err := w.fitInline(ctx, call, resp)
	if err != nil {
		return err
	}
	_, err = w.bus.JS.PublishMsg(ctx, &nats.Msg{Subject: w.resultSubject(call), Data: data, Header: firstOnSubject})
	return err
}

// firstOnSubject is the header jetstream.WithExpectLastSequencePerSubject(0)
// sets (the result is stored only if its subject has none yet), shared by
// every result publish: nothing writes to it.
var firstOnSubject = nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}}

func (w *Worker) publishEvent(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) {
	w.redactEvent(call, ev)
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	if err != nil {
		return
	}
	// Events are best effort: a core publish the events stream captures.
	if err := w.bus.NC.Publish(w.bus.Subjects.Event(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId), data); err != nil {
		w.log.Debug("publish event failed", "call_id", call.CallId, "err", err)
	}
}

func (w *Worker) deadLetter(ctx context.Context, t toolwirev1.ExecutorType, call *toolwirev1.ToolCall, msg jetstream.Msg, reason string, te *toolwirev1.ToolError, attempts int32) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if sec := w.secretsOf(call); sec != nil {
		reason = sec.String(reason)
		sec.ToolError(te)
	}
	dl := &toolwirev1.DeadLetter{Call: call, Subject: msg.Subject(), Reason: reason, LastError: te,
		Attempts: attempts, Time: timestamppb.Now(), Worker: w.cfg.Name}
	subj := w.bus.Subjects.DLQ(t, "_unknown", "_unknown", "_unknown")
	if call == nil {
		dl.Raw = msg.Data()
	} else {
		subj = w.bus.Subjects.DLQ(t, call.GetCaller().GetTenant(), call.Provider, call.Tool)
	}
	data, err := proto.Marshal(dl)
	if err == nil {
		_, err = w.bus.JS.Publish(ctx, subj, data)
	}
	if err != nil {
		w.log.ErrorContext(ctx, "dead letter not written", "subject", msg.Subject(), "err", err)
	}
}

func preExecError(t toolwirev1.ErrorType, msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: t, Message: msg, Retryable: false,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

func (w *Worker) meta(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, started, finished time.Time) *toolwirev1.ResponseMeta {
	m := &toolwirev1.ResponseMeta{
		Worker: w.cfg.Name, Attempt: call.Attempt, Source: "worker", Session: call.GetCaller().GetSession(),
		StartedAt: timestamppb.New(started), FinishedAt: timestamppb.New(finished),
		Duration: durationpb.New(finished.Sub(started)), AcceptedAt: call.AcceptedAt, SpecVersion: call.SpecVersion,
	}
	if spec != nil {
		if m.SpecVersion == "" {
			m.SpecVersion = spec.Version
		}
		m.IsolationGaps = w.gaps[spec.Executor]
		if si := w.specGaps[spec.Executor]; si != nil {
			if extra := si.SpecIsolationGaps(spec); len(extra) > 0 {
				m.IsolationGaps = slices.Concat(m.IsolationGaps, extra)
			}
		}
	}
	return m
}

func (w *Worker) errorResponse(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, te *toolwirev1.ToolError, started, finished time.Time) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Tool: call.Tool, Ok: false, Error: te,
		Meta: w.meta(call, spec, started, finished)}
}

func (w *Worker) okResponse(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, res *tool.Result, started, finished time.Time) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Tool: call.Tool, Ok: true,
		Content: res.Content, StructuredJson: string(res.Structured), Intents: res.Intents, MetaJson: string(res.Meta),
		Meta: w.meta(call, spec, started, finished)}
}

// ctxErr prefers the context's own error when the executor returned
// something vaguer after its context ended.
func ctxErr(ctx context.Context, err error) error {
	var te *tool.Error
	if errors.As(err, &te) {
		return err
	}
	return ctx.Err()
}

// callLog logs with a call's attributes, built only when a line is
// written: slog.With per call would cost an allocation-heavy handler
// clone on the hot path. Lines carry the call's context (its trace ids);
// the strings and errors among their arguments are redacted.
type callLog struct {
	ctx      context.Context
	w        *Worker
	call     *toolwirev1.ToolCall
	delivery int32
}

func (c callLog) log(level slog.Level, msg string, args ...any) {
	l := c.w.log
	if !l.Enabled(c.ctx, level) {
		return
	}
	args = redactArgs(c.w.secretsOf(c.call), args)
	l.Log(c.ctx, level, msg, append([]any{"call_id", c.call.CallId, "tool", c.call.Tool, "delivery", c.delivery}, args...)...)
}

func (c callLog) Debug(msg string, args ...any) { c.log(slog.LevelDebug, msg, args...) }
func (c callLog) Info(msg string, args ...any)  { c.log(slog.LevelInfo, msg, args...) }
func (c callLog) Warn(msg string, args ...any)  { c.log(slog.LevelWarn, msg, args...) }
func (c callLog) Error(msg string, args ...any) { c.log(slog.LevelError, msg, args...) }

// sameTenant reports whether the tenant token of a call subject is the
// payload's tenant exactly, and a valid tenant name: a tenant is never
// mapped to a token (a.b would answer as a_b).
func (w *Worker) sameTenant(subject string, call *toolwirev1.ToolCall) bool {
	// <prefix>.call.<type>.<tenant>.<provider>.<tool>
	tenant := call.GetCaller().GetTenant()
	parts := strings.SplitN(subject, ".", 5)
	return len(parts) >= 4 && parts[3] == tenant && bus.ValidTenant(tenant)
}
