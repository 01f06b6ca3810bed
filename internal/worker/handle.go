package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// settleTimeout bounds publishing a result, a dead letter or an ack.
const settleTimeout = 10 * time.Second

// handle runs one delivered call to a settled message: every path ends in
// an ack, a nak or a term, and every settle error is logged.
func (w *Worker) handle(p Pool, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	attempt := int32(1)
	if md, err := msg.Metadata(); err == nil {
		attempt = int32(md.NumDelivered)
	}

	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(msg.Data(), call); err != nil || call.CallId == "" || call.Caller == nil {
		reason := "undecodable call"
		if err != nil {
			reason += ": " + err.Error()
		} else {
			reason += ": call_id or caller missing"
		}
		w.log.Warn("terminating call", "subject", msg.Subject(), "reason", reason)
		w.deadLetter(ctx, p.Type, nil, msg, reason, nil, attempt)
		w.settle(msg, "term", msg.TermWithReason(reason))
		return
	}
	call.Attempt = attempt
	log := w.log.With("call_id", call.CallId, "tool", call.Tool, "attempt", attempt)

	if reason := w.integrity(p, msg.Subject(), call); reason != "" {
		w.refuse(ctx, p, msg, call, log, preExecError(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, reason))
		return
	}
	spec, ok := w.specs[call.Tool]
	if !ok {
		w.refuse(ctx, p, msg, call, log, preExecError(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			fmt.Sprintf("worker %s does not serve tool %q", w.cfg.Name, call.Tool)))
		return
	}
	if call.SpecVersion != "" && call.SpecVersion != spec.Version {
		w.refuse(ctx, p, msg, call, log, preExecError(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			fmt.Sprintf("unknown spec version %q of tool %q (this worker serves %q)", call.SpecVersion, call.Tool, spec.Version)))
		return
	}

	// A redelivered call may already have its result: answer from it.
	if attempt > 1 {
		if _, err := w.bus.Results.GetLastMsgForSubject(ctx, w.resultSubject(call)); err == nil {
			log.Debug("result already published; acknowledging redelivery")
			w.settle(msg, "ack", msg.Ack())
			return
		}
	}
	now := time.Now()
	if dl := call.ScheduleToStartDeadline; dl != nil && now.After(dl.AsTime()) {
		w.finish(ctx, msg, call, log, w.errorResponse(call, spec, preExecError(toolwirev1.ErrorType_ERROR_TYPE_EXPIRED,
			fmt.Sprintf("not started within its schedule-to-start deadline (%s late); never executed", now.Sub(dl.AsTime()).Round(time.Millisecond))), now, now))
		return
	}
	if dl := call.Deadline; dl != nil && now.After(dl.AsTime()) {
		w.finish(ctx, msg, call, log, w.errorResponse(call, spec, preExecError(toolwirev1.ErrorType_ERROR_TYPE_EXPIRED,
			"schedule-to-close deadline passed before the call started; never executed"), now, now))
		return
	}

	w.publishEvent(call, &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED})
	res, execErr := w.execute(msg, p, call, spec)
	finished := time.Now()
	w.executed.Add(1)
	if execErr != nil && errors.Is(context.Cause(w.execCtx), ErrShutdown) && w.execCtx.Err() != nil {
		// Interrupted by our own shutdown: not a failed attempt. Hand it back
		// at once so another worker takes it.
		log.Info("handing back call interrupted by shutdown")
		w.settle(msg, "nak", msg.Nak())
		return
	}
	var resp *toolwirev1.ToolResponse
	if execErr != nil {
		te := tool.AsError(nil, execErr).Proto()
		resp = w.errorResponse(call, spec, te, now, finished)
	} else {
		resp = w.okResponse(call, spec, res, now, finished)
	}
	w.finish(ctx, msg, call, log, resp)
}

// execute runs one attempt with its timeout and heartbeats, turning a
// panic into an INTERNAL error.
func (w *Worker) execute(msg jetstream.Msg, p Pool, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec) (res *tool.Result, err error) {
	timeout := w.cfg.StartToClose
	if d := spec.GetTimeouts().GetStartToClose(); d != nil && d.AsDuration() > 0 {
		timeout = d.AsDuration()
	}
	if d := call.StartToClose; d != nil && d.AsDuration() > 0 && d.AsDuration() < timeout {
		timeout = d.AsDuration()
	}
	ctx, cancel := context.WithTimeout(w.execCtx, timeout)
	defer cancel()
	if dl := call.Deadline; dl != nil {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl.AsTime())
		defer c2()
	}
	ctx = tool.WithCallInfo(ctx, tool.CallInfo{CallID: call.CallId, Tool: call.Tool, Attempt: call.Attempt, Caller: call.Caller})

	hbDone := make(chan struct{})
	defer close(hbDone)
	go func() {
		t := time.NewTicker(p.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					w.log.Warn("heartbeat failed", "call_id", call.CallId, "err", err)
				}
			}
		}
	}()

	defer func() {
		if r := recover(); r != nil {
			w.log.Error("executor panicked", "call_id", call.CallId, "tool", call.Tool, "panic", r, "stack", string(debug.Stack()))
			res, err = nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
				Message: fmt.Sprintf("tool panicked: %v", r), SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
		}
	}()
	exec := w.cfg.Executors[spec.Executor]
	res, err = exec.Execute(ctx, &executors.Request{Call: call, Spec: spec})
	if err == nil && res == nil {
		res = &tool.Result{}
	}
	if err != nil && ctx.Err() != nil {
		err = tool.AsError(ctx, ctxErr(ctx, err))
	}
	return res, err
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

// refuse answers a call that must not run: an error response, a dead
// letter, and Term so it is never redelivered.
func (w *Worker) refuse(ctx context.Context, p Pool, msg jetstream.Msg, call *toolwirev1.ToolCall, log *slog.Logger, te *toolwirev1.ToolError) {
	log.Warn("refusing call", "reason", te.Message)
	now := time.Now()
	resp := w.errorResponse(call, nil, te, now, now)
	if err := w.publishResult(ctx, call, resp); err != nil && !bus.IsWrongLastSequence(err) {
		log.Error("publish refusal failed; redelivering", "err", err)
		w.settle(msg, "nak", msg.NakWithDelay(time.Second))
		return
	}
	w.deadLetter(ctx, p.Type, call, msg, te.Message, te, call.Attempt)
	w.settle(msg, "term", msg.TermWithReason(te.Message))
}

// finish publishes the terminal response once and then acknowledges.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, call *toolwirev1.ToolCall, log *slog.Logger, resp *toolwirev1.ToolResponse) {
	err := w.publishResult(ctx, call, resp)
	switch {
	case err == nil:
	case bus.IsWrongLastSequence(err):
		log.Info("a result was already published; keeping it")
	default:
		log.Error("publish result failed; redelivering", "err", err)
		w.settle(msg, "nak", msg.NakWithDelay(time.Second))
		return
	}
	w.settle(msg, "ack", msg.Ack())
}

func (w *Worker) settle(msg jetstream.Msg, verb string, err error) {
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		w.log.Error("settling call failed", "verb", verb, "subject", msg.Subject(), "err", err)
	}
}

func (w *Worker) resultSubject(call *toolwirev1.ToolCall) string {
	return w.bus.Subjects.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
}

func (w *Worker) publishResult(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
	data, err := w.fitInline(ctx, call, resp)
	if err != nil {
		return err
	}
	_, err = w.bus.JS.Publish(ctx, w.resultSubject(call), data, jetstream.WithExpectLastSequencePerSubject(0))
	return err
}

func (w *Worker) publishEvent(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) {
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

// integrity checks that the subject agrees with the payload.
func (w *Worker) integrity(p Pool, subject string, call *toolwirev1.ToolCall) string {
	if call.Executor != p.Type {
		return fmt.Sprintf("call of executor %s delivered to pool %s", call.Executor, p.Name)
	}
	want := w.bus.Subjects.Call(call.Executor, call.Caller.GetTenant(), call.Provider, call.Tool)
	if subject != want {
		return fmt.Sprintf("subject %q disagrees with the call (want %q)", subject, want)
	}
	return ""
}

func (w *Worker) deadLetter(ctx context.Context, t toolwirev1.ExecutorType, call *toolwirev1.ToolCall, msg jetstream.Msg, reason string, te *toolwirev1.ToolError, attempts int32) {
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
		w.log.Error("dead letter not written", "subject", msg.Subject(), "err", err)
	}
}

func preExecError(t toolwirev1.ErrorType, msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: t, Message: msg, Retryable: false,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

func (w *Worker) meta(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, started, finished time.Time) *toolwirev1.ResponseMeta {
	m := &toolwirev1.ResponseMeta{
		Worker: w.cfg.Name, Attempt: call.Attempt, Source: "worker",
		StartedAt: timestamppb.New(started), FinishedAt: timestamppb.New(finished),
		Duration: durationpb.New(finished.Sub(started)), AcceptedAt: call.AcceptedAt, SpecVersion: call.SpecVersion,
	}
	if spec != nil && m.SpecVersion == "" {
		m.SpecVersion = spec.Version
	}
	return m
}

func (w *Worker) errorResponse(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, te *toolwirev1.ToolError, started, finished time.Time) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Tool: call.Tool, Ok: false, Error: te,
		Meta: w.meta(call, spec, started, finished)}
}

func (w *Worker) okResponse(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, res *tool.Result, started, finished time.Time) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: call.CallId, Tool: call.Tool, Ok: true,
		Content: res.Content, StructuredJson: string(res.Structured), Intents: res.Intents,
		Meta: w.meta(call, spec, started, finished)}
}
