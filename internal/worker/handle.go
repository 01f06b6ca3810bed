package worker

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/failpoint"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/shellquote"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The life of one delivered call, in the order it is lived (doc.go tells
// it in prose): handle → decode → precheck → register → recheck → gate →
// attempts (retry.go: the loop and its policy) → attempt → decide, and
// then settle (settle.go), which carries out the outcome the steps
// decided: ack, nak, term or a retry schedule.

// delivery is one delivered call on its way from fetch to settling: what
// every step of its life needs, in one value allocated once per delivery.
// It also holds the call's slot in its pool and the watchdog's view of
// its first attempt, which need no allocation of their own so. Its
// methods are the steps; each either leaves the call to the next step (it
// returns the zero outcome) or decides its outcome.
type delivery struct {
	w    *Worker
	pool *Pool
	msg  jetstream.Msg
	// ctx carries only values (the delivery's span), never a deadline or
	// a cancellation: each step that talks to the server bounds itself
	// (settleTimeout), since a deadline for the whole call would expire
	// under long executions.
	ctx context.Context
	// count is JetStream's delivery count of msg.
	count int32
	slot  slot

	// call is the decoded call, nil when it is not to be answered; its
	// Attempt is the attempt under way (the delivery count until the
	// attempts begin).
	call *toolwirev1.ToolCall
	spec *toolwirev1.ToolSpec // the version served for it (precheck)
	// carried is the attempt a call put back after a scheduled retry
	// carries (0 for others); such a call is handled like a redelivery.
	carried int32

	// The call's context, cancelled with a cause (by its caller or the
	// worker's shutdown), and its entry in the worker's cancels (register).
	callCtx context.Context
	cancel  context.CancelCauseFunc
	reg     *registration
	// seen is the call's cancel tombstone, if register or recheck found
	// one; prev is the last attempt event an earlier delivery left.
	seen *bus.Tombstone
	prev *toolwirev1.CallEvent
	// looked is set once prev is known: read by recheck, or none for a
	// first delivery.
	looked bool
	// startedSeq is the stream sequence of the last STARTED this
	// delivery stored (claimStart), 0 before the first.
	startedSeq uint64
	// took is the last attempt this delivery took as its own: its
	// STARTED stored as the attempt's claim, or scheduled (a tool safe to
	// rerun); 0 before the first. An answer names it (answerMeta), never
	// an attempt number the delivery has not taken yet.
	took int32
	// ran is set once an attempt of this delivery has run: its response
	// is the after-hooks' to look at (afterhooks.go).
	ran bool

	// started and finished time the attempt under way, or the moment of a
	// decision taken before any.
	started, finished time.Time
	// first is the watchdog's view of the first attempt (execute).
	first execution
}

// handle runs one delivered call to a settled message: every path ends in
// an ack, a nak or a term, and every settle error is logged. Two paths
// leave the message unsettled on purpose: an execution that ignores its
// context past the watchdog is abandoned without heartbeats, so JetStream
// redelivers it after AckWait; and a delivery that finds another one
// started the attempt first leaves the call to it (claimStart).
func (d *delivery) handle() {
	failpoint.Inject("after-fetch")
	// Heartbeats last until the call is settled: a step that holds the
	// call while the server does not answer (hold.go) keeps it.
	d.pool.hb.add(d.msg)
	defer d.pool.hb.remove(d.msg)
	o := d.decode()
	if !o.decided() {
		o = d.precheck()
	}
	if o.decided() {
		d.settle(o)
		return
	}
	// The registration for cancellation lasts until the call is settled.
	d.register()
	defer d.unregister()
	o = d.recheck()
	if !o.decided() {
		o = d.gate()
	}
	if !o.decided() {
		o = d.checkPolicy(nil)
	}
	if !o.decided() {
		o = d.attempts()
	}
	d.settle(o)
}

// decode decodes the call and checks its integrity (DecodeCall). A call
// that cannot be answered is terminated and dead-lettered raw; one that
// can is refused.
func (d *delivery) decode() outcome {
	call, err := DecodeCall(d.w.bus.Subjects, d.pool.Type, d.msg.Subject(), d.msg.Data())
	var bad *BadCallError
	switch {
	case errors.As(err, &bad) && call == nil:
		d.w.log.WarnContext(d.ctx, "terminating call", "subject", d.msg.Subject(), "reason", bad.Reason)
		return terminate(bad.Reason, nil)
	case errors.As(err, &bad) && !d.w.sameTenant(d.msg.Subject(), call):
		// The payload names another tenant than its subject, or a tenant
		// that is no valid name: answering would write a result into a
		// tenant's namespace on a stranger's word (or under a mapped
		// name). A call whose tenant is no valid name is dead-lettered
		// raw, under no tenant, rather than under a mapped one.
		d.w.log.WarnContext(d.ctx, "terminating call whose tenant cannot be answered", "subject", d.msg.Subject(), "reason", bad.Reason)
		// Raw (no call) in every case: a letter keeping the call would let
		// `dlq retry` queue it for the payload's tenant on that stranger's
		// word, as the reaper and the orphan sweeper also never do.
		return terminate(bad.Reason, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, bad.Reason))
	case errors.As(err, &bad):
		call.Attempt = d.count
		d.call = call
		return refusal(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, bad.Reason))
	}
	// A call put back on the stream after a scheduled retry carries the
	// attempt it reached; it is handled like a redelivery.
	d.carried = call.Attempt
	call.Attempt = d.count
	d.call = call
	d.w.annotateDelivery(d.ctx, call)
	return outcome{}
}

// precheck decides whether this replica runs the call. A tool or version
// it does not serve may be served by another replica of the pool (a
// rolling upgrade): the call is handed back, and refused only on its last
// delivery. What admission checked is checked again, since a call can
// arrive without passing a dispatcher: its arguments
// (registry.CheckArgs, admission's check) and approval (checkApproval).
// Whether the policy in force denies it now is decided last, right before
// it runs (checkPolicy).
func (d *delivery) precheck() outcome {
	call := d.call
	ent, ok := (*d.w.specs.Load())[call.Tool]
	if !ok {
		return d.notServed(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			fmt.Sprintf("no worker of pool %s serves tool %q", d.pool.Name, call.Tool)), nil)
	}
	if call.SpecVersion != "" && call.SpecVersion != ent.Spec.Version {
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			fmt.Sprintf("unknown spec version %q of tool %q (this worker serves %q)", call.SpecVersion, call.Tool, ent.Spec.Version))
		return d.notServed(te, func() { te.Suggestion = d.unservedVersionHint(ent.Spec.Version) })
	}
	if te := registry.CheckArgs(ent, call.Arguments, registry.ArgLimits{MaxBytes: d.w.cfg.MaxArgsBytes, MaxDepth: d.w.cfg.MaxArgsDepth}); te != nil {
		return refusal(te)
	}
	if o := d.checkApproval(ent.Spec); o.decided() {
		return o
	}
	d.spec = ent.Spec
	return outcome{}
}

// checkApproval is the approval step, the worker's re-check of what
// admission decided (approvals.CheckCall): a call that names an approval
// or a grant, or whose tool requires approval, runs only if the approval
// record (or grant) in the approvals bucket covers it exactly; otherwise
// it is refused CONFIRMATION_REQUIRED (answered, dead-lettered,
// terminated), never run. A bucket that cannot be read hands the call
// back only at shutdown, never runs it on a guess: while it cannot be
// read the delivery holds the call and reads again (persist). Other
// calls cost nothing here.
func (d *delivery) checkApproval(spec *toolwirev1.ToolSpec) outcome {
	call := d.call
	if call.ApprovalId == "" && call.GrantId == "" && !spec.GetRequiresApproval() {
		return outcome{}
	}
	var refused *approvals.RefusedError
	err := d.persist("approval lookup", d.lookup(func(ctx context.Context) error {
		err := approvals.CheckCall(ctx, d.w.bus, spec, call, time.Now())
		if errors.As(err, &refused) {
			return nil
		}
		return err
	}))
	switch {
	case err != nil:
		return d.heldOutcome(err)
	case refused != nil:
		d.w.stats.approvalRefusals.Add(1)
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
			fmt.Sprintf("the worker's approval check refused this call of %q: %s", call.Tool, refused.Reason))
		te.Suggestion = "submit the call through a dispatcher, which asks for (and records) the approval it needs"
		return refusal(te)
	}
	return outcome{}
}

// notServed hands a call this replica cannot run back to the pool, and
// refuses it (answer, dead letter, term) on the last delivery, after
// last (if any) has completed te.
func (d *delivery) notServed(te *toolwirev1.ToolError, last func()) outcome {
	md, err := d.msg.Metadata()
	if err == nil && (d.pool.MaxDeliver < 0 || md.NumDelivered < uint64(d.pool.MaxDeliver)) {
		d.log().Info("handing back a call this replica does not serve", "reason", te.Message)
		return retryLater(d.w.cfg.NotServedDelay)
	}
	if last != nil {
		last()
	}
	return refusal(te)
}

// unservedVersionHint is the suggestion of a call refused on its last
// delivery for a spec version no replica of its pool ran (this one runs
// served): the version the call named, or the one its session pins
// (admission runs a pinned version, never another: docs/policy.md,
// "Versions locked per session"). Clearing the pin helps only when the
// registry's current version, which the session's next call would pin,
// is another one and is served: so the hint says so only when the
// current version is served, here. When the call's version is the
// current one (or the current one cannot be read, or is another this
// worker does not run), it says plainly that no worker runs the version.
func (d *delivery) unservedVersionHint(served string) string {
	call := d.call
	current := d.currentVersion()
	if current == "" || current != served {
		what := fmt.Sprintf("no worker of pool %s runs version %q of tool %q now", d.pool.Name, call.SpecVersion, call.Tool)
		if current == call.SpecVersion {
			what += ", the registry's current version (clearing a session's pin would pin it again)"
		}
		return what + ": start a worker that serves it; a pinned version is never swapped for another"
	}
	hint := fmt.Sprintf("no worker of the pool runs this version now: leave spec_version empty to run the current one (%q)", current)
	if s := call.GetCaller().GetSession(); s != "" && len(s) <= maxHintSession && utf8.ValidString(s) {
		hint += fmt.Sprintf("; when session %q pins this version, clear the pin (`toolctl session repin %s %s`, the ClearSessionPins RPC), so that its next call pins the current one",
			s, shellquote.Quote(s), shellquote.Quote(call.Tool))
	}
	return hint
}

// currentVersion is the registry's current version of the call's tool,
// "" when it cannot be read (a hint is not worth waiting for).
func (d *delivery) currentVersion() string {
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
	defer cancel()
	e, err := d.w.bus.Registry.Get(ctx, d.call.Tool)
	if err != nil {
		return ""
	}
	var spec toolwirev1.ToolSpec
	if proto.Unmarshal(e.Value(), &spec) != nil {
		return ""
	}
	return spec.GetVersion()
}

// maxHintSession is the longest session name unservedVersionHint repeats:
// admission's bound (dispatch.MaxSessionBytes).
const maxHintSession = 256

// register makes the call cancellable, and notes a tombstone the cancel
// watcher has seen for it. It registers first and looks for a tombstone
// after (recheck): a cancel arriving in between still reaches the call.
//
// The call's context is not a child of a worker-wide context: a shared
// parent would take a lock and a map update per call. Shutdown reaches the
// call through the same registry that cancels reach it through. d.ctx
// only adds values to context.Background(), so this is still a root for
// cancellation: no parent to propagate from, no lock.
func (d *delivery) register() {
	d.callCtx, d.cancel = context.WithCancelCause(d.ctx)
	d.seen, d.reg = d.w.cancels.register(bus.CancelKey(d.call.Caller.Tenant, d.call.CallId), d.cancel)
}

// unregister undoes register once the call is settled.
func (d *delivery) unregister() {
	d.w.cancels.unregister(d.reg)
	d.cancel(nil)
}

// recheck reads what earlier deliveries left, for a redelivered or
// rescheduled call: a result (the redelivery is acknowledged without
// running), the last attempt event (prev) and the cancel tombstone. A
// first delivery looks its tombstone up too when the cancel watcher may
// have missed it (cancels.lookupNeeded). The result and the events are
// read from the streams' leaders (a replica that lags would say none); the
// tombstone is a KV get. A call is never run on a guess: while a lookup
// fails the delivery holds the call and looks again (persist), and hands
// it back only at shutdown.
func (d *delivery) recheck() outcome {
	w, call := d.w, d.call
	// A first delivery of a call accepted long ago looks too: the overdue
	// sweeper (internal/maintenance) may have answered it while it waited
	// (a pool without workers for an hour), and a call that has its
	// answer must not run after it.
	again := d.again() || time.Since(call.AcceptedAt.AsTime()) > lateFirstDelivery
	if again {
		found := false
		err := d.persist("result lookup", d.lookup(func(ctx context.Context) error {
			s, err := w.answers().Read(ctx, w.resultSubject(call), call.Tool)
			found = s != nil
			return err
		}))
		if err != nil {
			return d.heldOutcome(err)
		}
		if found {
			d.log().Debug("result already published; acknowledging redelivery")
			return acknowledge()
		}
		err = d.persist("event lookup", d.lookup(func(ctx context.Context) (err error) {
			d.prev, err = w.lastEvent(ctx, call)
			return err
		}))
		if err != nil {
			return d.heldOutcome(err)
		}
	}
	d.looked = true
	d.started = time.Now()
	d.finished = d.started
	if d.seen == nil && (again || w.cancels.lookupNeeded(call.AcceptedAt.AsTime(), d.started, w.bus.NC.Stats().Reconnects)) {
		err := d.persist("cancel lookup", d.lookup(func(ctx context.Context) (err error) {
			d.seen, err = w.tombstone(ctx, call.Caller.Tenant, call.CallId)
			return err
		}))
		if err != nil {
			return d.heldOutcome(err)
		}
		d.started = time.Now()
		d.finished = d.started
	}
	return outcome{}
}

// lateFirstDelivery is the age past which a first delivery looks for a
// stored result before it runs, as a redelivery does (recheck): far below
// the overdue sweeper's earliest answer (a deadline plus its grace, or an
// hour for a call without a deadline), far above a queue's usual wait.
const lateFirstDelivery = time.Minute

// again says whether the call was delivered before or put back after a
// scheduled retry: an earlier attempt may have run.
func (d *delivery) again() bool { return d.count > 1 || d.carried > 0 }

// gate answers the calls that must not run: cancelled before they
// started; of a tool that is not safe to rerun whose earlier attempt
// started without a result (UNKNOWN_OUTCOME); past their schedule-to-start
// or schedule-to-close deadline (EXPIRED, never executed late). A
// redelivery of a call whose earlier delivery is still in flight in this
// worker — JetStream redelivered it while that delivery held it, as a
// pool consumer's new leader does with calls delivered more than AckWait
// before — is left to that delivery, which settles the message: it may
// be publishing the tool's result (an election on RESULTS), which an
// UNKNOWN_OUTCOME or a second run would otherwise pre-empt.
func (d *delivery) gate() outcome {
	call, now := d.call, d.started
	if d.again() && d.w.cancels.liveOther(d.reg) {
		d.log().Info("an earlier delivery of this call is in flight here; leaving this one to it")
		return leave()
	}
	if ts := d.seen; ts != nil {
		return answer(d.cancelled(&CancelledError{*ts}, " before it started", sideEffectsOf(d.prev)))
	}
	if unknownOutcome(d.prev) && !safeToRerun(d.spec) {
		if o := d.awaitEarlierResult(); o.decided() {
			return o
		}
		now = d.started
	}
	if unknownOutcome(d.prev) && !safeToRerun(d.spec) {
		d.w.stats.unknownOutcomes.Add(1)
		return answer(d.errorResponse(unknownOutcomeError(d.prev)))
	}
	if te := d.lateStart(now); te != nil {
		return answer(d.errorResponse(te))
	}
	if dl := call.Deadline; dl != nil && now.After(dl.AsTime()) {
		return d.expired()
	}
	return outcome{}
}

// lateStart is the EXPIRED error of a call whose schedule-to-start
// deadline passed before now, when no attempt of it ran before (a
// schedule-to-start bounds the wait for the first start only); nil
// otherwise. gate asks it before the attempts, and attempt again once
// the start is recorded (the STARTED claim of a tool that is not safe to
// rerun may be held while the events stream does not answer, and a
// loaded worker may take long between the two): no call whose start is
// recorded past its deadline runs.
func (d *delivery) lateStart(now time.Time) *toolwirev1.ToolError {
	dl := d.call.ScheduleToStartDeadline
	if dl == nil || d.prev != nil || d.ran || !now.After(dl.AsTime()) {
		return nil
	}
	return envelope.Expired(fmt.Sprintf("not started within its schedule-to-start deadline (%s late); never executed",
		now.Sub(dl.AsTime()).Round(time.Millisecond)))
}

// expired answers a call whose schedule-to-close deadline passed before
// this delivery ran an attempt: EXPIRED when no attempt ever ran, a
// TIMEOUT with what earlier attempts may have done otherwise, and a
// TIMEOUT with side effects UNKNOWN when the delivery could not look up
// what earlier deliveries did (the streams did not answer in time).
func (d *delivery) expired() outcome {
	d.started = time.Now()
	d.finished = d.started
	var te *toolwirev1.ToolError
	switch {
	case !d.looked && d.again():
		te = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
			Message: "schedule-to-close deadline passed while this delivery could not look up what earlier deliveries did (the streams did not answer); it did not run the tool"}
	case d.prev == nil && !d.ran:
		te = envelope.Expired("schedule-to-close deadline passed before the call started; never executed")
	default:
		te = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Message: "schedule-to-close deadline passed",
			PartialSideEffects: sideEffectsOf(d.prev)}
	}
	return answer(d.errorResponse(te))
}

// attempt runs attempt d.call.Attempt and decides what it leads to: an
// outcome, or, for a failure the retry policy decides on (attempts), the
// tool error it failed with.
func (d *delivery) attempt() (outcome, *tool.Error) {
	d.started = time.Now()
	d.finished = d.started
	// A cancel or shutdown that arrived after the checks, before the
	// attempt starts: it never starts.
	if cause := context.Cause(d.callCtx); cause != nil {
		return d.interrupted(cause), nil
	}
	startedEv, err := d.startedEvent()
	if errors.Is(err, errCancelledFirst) {
		d.took = d.call.Attempt
		return d.claimedNotRun(err), nil // a cancel was stored before its start
	}
	if err != nil {
		return d.notRun(err), nil
	}
	d.took = d.call.Attempt
	// The start is recorded: its moment is the attempt's start, checked
	// against the schedule-to-start deadline (lateStart).
	d.started = time.Now()
	d.finished = d.started
	if te := d.lateStart(d.started); te != nil {
		startedEv.Stop()
		return answer(d.errorResponse(te)), nil
	}
	// Reached while its start was recorded (held while the events stream
	// did not answer): it never starts.
	if cause := context.Cause(d.callCtx); cause != nil && !safeToRerun(d.spec) {
		return d.claimedNotRun(cause), nil
	}
	attemptCtx, attemptSpan := d.w.startAttempt(d.callCtx, d.call)
	res, execErr, abandoned := d.execute(attemptCtx, startedEv)
	endAttempt(attemptSpan, execErr, abandoned)
	startedEv.Stop()
	if abandoned {
		// The watchdog gave up on it (watchdog.go): never settle it from
		// here.
		return leave(), nil
	}
	d.finished = time.Now()
	d.ran = true
	d.w.executed.Add(1)
	return d.decide(res, execErr)
}

// interrupted answers a call cancelled by its caller before its attempt
// started, and hands back one the worker's shutdown reached first.
func (d *delivery) interrupted(cause error) outcome {
	var ce *CancelledError
	if errors.As(cause, &ce) {
		return answer(d.cancelled(ce, " before the attempt started", toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE))
	}
	return handBack(0, envelope.Interrupted(cause.Error(), toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE))
}

// decide turns what an attempt returned into the call's outcome: the
// result, a cancellation, or a hand-back at shutdown. Any other failure
// is returned for the retry policy (attempts).
func (d *delivery) decide(res *tool.Result, execErr error) (outcome, *tool.Error) {
	if execErr == nil {
		return d.succeeded(res), nil
	}
	terr := tool.AsError(d.callCtx, execErr)
	var ce *CancelledError
	switch cause := context.Cause(d.callCtx); {
	case errors.As(cause, &ce):
		return answer(d.cancelled(ce, "", cancelledSideEffects(d.spec, execErr))), nil
	case errors.Is(cause, ErrShutdown):
		// Interrupted by our own shutdown: not a failed attempt. Hand it
		// back at once so another worker takes it, recording whether a
		// rerun is safe.
		fx := cancelledSideEffects(d.spec, execErr)
		// Not stored, the redelivery reads this attempt's STARTED and
		// answers UNKNOWN_OUTCOME: the safe side.
		_ = d.w.attemptEvent(d.ctx, d.call, d.spec, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING,
			Message: "handed back: worker shutting down",
			Error:   envelope.Interrupted(ErrShutdown.Error(), fx)})
		return handBack(0, terr.Proto()), nil
	}
	return outcome{}, terr
}

// succeeded answers an attempt that returned a result, unless its intents
// are not the tool's to return.
func (d *delivery) succeeded(res *tool.Result) outcome {
	if err := intents.Check(d.spec, res.Intents); err != nil {
		// The tool ran: its side effects happened, but its intents must
		// not reach an orchestrator.
		d.w.stats.badIntents.Add(1)
		d.log().Error("tool returned invalid intents; answering INTERNAL", "err", err)
		return answer(d.errorResponse(&toolwirev1.ToolError{
			Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "the tool returned invalid intents: " + err.Error(),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE,
		}))
	}
	if res.Input != nil {
		return d.inputRequired(res)
	}
	if te := d.checkOutput(res); te != nil {
		return answer(d.errorResponse(te))
	}
	return answer(d.okResponse(res))
}

// inputRequired answers an attempt whose tool asks its caller for input
// (tool.NeedInput), bound to the arguments the caller sent; one that
// also returns output, or breaks the input's limits, is the tool's bug.
func (d *delivery) inputRequired(res *tool.Result) outcome {
	in, err := res.Input.Proto()
	if err == nil && (len(res.Content) > 0 || len(res.Structured) > 0 || len(res.Intents) > 0) {
		err = errors.New("tool: an input-required answer has no content, structured output or intents")
	}
	if err != nil {
		d.log().Error("tool returned an invalid input-required answer; answering INTERNAL", "err", err)
		return answer(d.errorResponse(&toolwirev1.ToolError{
			Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "the tool's input-required answer is invalid: " + err.Error(),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE,
		}))
	}
	in.ArgsSha256 = d.call.CallerArgsSha256
	if len(in.ArgsSha256) == 0 {
		// Admitted arguments parse: the dispatcher checked them.
		in.ArgsSha256, _ = policy.ArgsDigest(d.call.Arguments)
	}
	resp := d.okResponse(&tool.Result{Meta: res.Meta})
	resp.InputRequired = in
	return answer(resp)
}

// log is the call's logger (log.go).
func (d *delivery) log() callLog { return callLog{d.ctx, d.w, d.call, d.count} }
