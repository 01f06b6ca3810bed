package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// execute runs the attempt under way on this goroutine under its
// timeouts: start-to-close, the tool's heartbeat timeout and the call's
// deadline. A panic becomes an INTERNAL error. abandoned is true when the
// watchdog gave up on the execution (it ran on for Watchdog after its
// context ended) before it returned; res and err are then meaningless.
func (d *delivery) execute(callCtx context.Context, started *delayed.Record) (res *tool.Result, err error, abandoned bool) {
	call, spec := d.call, d.spec
	timeout := d.w.cfg.StartToClose
	if t := spec.GetTimeouts().GetStartToClose(); t != nil && t.AsDuration() > 0 {
		timeout = t.AsDuration()
	}
	if t := call.StartToClose; t != nil && t.AsDuration() > 0 && t.AsDuration() < timeout {
		timeout = t.AsDuration()
	}
	ctx, cancel := context.WithTimeout(callCtx, timeout)
	defer cancel()
	if dl := call.Deadline; dl != nil {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl.AsTime())
		defer c2()
	}
	rep := &reporter{w: d.w, call: call, started: started}
	if hbt := spec.GetTimeouts().GetHeartbeat().AsDuration(); hbt > 0 {
		var cancelHB context.CancelCauseFunc
		ctx, cancelHB = context.WithCancelCause(ctx)
		defer cancelHB(nil)
		rep.timer = time.AfterFunc(hbt, func() { cancelHB(errHeartbeatTimeout) })
		rep.every = hbt
		defer rep.timer.Stop()
	}
	ctx = tool.WithReporter(tool.WithCallInfo(ctx, tool.CallInfo{CallID: call.CallId, Tool: call.Tool, Attempt: call.Attempt, Caller: call.Caller,
		Input: call.Input, ClientCapabilities: call.ClientCapabilitiesJson}), rep)

	// The first attempt's view is part of the delivery; a later one gets
	// its own, since the watchdog may still be looking at the first.
	ex := &d.first
	if ex.d != nil {
		ex = &execution{}
	}
	ex.d, ex.ctx = d, ctx
	d.reg.begin(ex)
	res, err = d.w.run(ctx, call, spec)
	if !d.reg.end(ex) {
		d.w.stats.abandonedRunning.Add(-1)
		return nil, nil, true
	}
	// The progress the tool reported is stored before its result is
	// published: a Watch that finds the result finds every PROGRESS too.
	// Waited for once the tool has returned (reg.end), so that the wait
	// does not count towards the watchdog's.
	rep.settle()
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

// ctxErr prefers the context's own error when the executor returned
// something vaguer after its context ended.
func ctxErr(ctx context.Context, err error) error {
	var te *tool.Error
	if errors.As(err, &te) {
		return err
	}
	return ctx.Err()
}

var errHeartbeatTimeout = errors.New("heartbeat timeout")

var _ tool.PartialReporter = (*reporter)(nil)

// reporter turns tool progress and partial output into PROGRESS events
// and heartbeats (a tool.PartialReporter).
type reporter struct {
	w       *Worker
	call    *toolwirev1.ToolCall
	started *delayed.Record
	timer   *time.Timer
	every   time.Duration

	mu sync.Mutex
	// last is the acknowledgement of the newest PROGRESS event published
	// by JetStream (nil: none; an event that fell back to a core publish
	// leaves it as it was).
	last jetstream.PubAckFuture
}

// Progress publishes a PROGRESS event without waiting for the events
// stream to store it (publishProgress); settle waits for the last one.
func (r *reporter) Progress(message string, percent float64) {
	ev := &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Message: message}
	if percent >= 0 {
		ev.Percent = &percent
	}
	r.publish(ev)
}

// Partial publishes a chunk of the tool's partial output (tool.Partial,
// which bounds and numbers the chunks) as a PROGRESS event with
// CallEvent.partial, the same way as Progress: signed, redacted, and
// stored before the result (settle).
func (r *reporter) Partial(seq uint32, content []*toolwirev1.Content) {
	r.publish(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Partial: content, PartialSeq: seq})
}

// publish publishes a PROGRESS event ev: after STARTED, as a heartbeat.
func (r *reporter) publish(ev *toolwirev1.CallEvent) {
	r.started.Flush() // STARTED precedes the first progress event
	if r.timer != nil {
		r.timer.Reset(r.every)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// An event that fell back to a core publish has no acknowledgement:
	// the earlier one's is still the one to wait for.
	if f := r.w.publishProgress(r.call, ev); f != nil {
		r.last = f
	}
}

// settle waits until the events stream has taken the last PROGRESS event
// published (and with it every earlier one: one connection's messages to
// one stream are stored in order), at most bus.PublishAsyncTimeout (the
// acknowledgement's own bound). Progress is best effort still: a refused
// or unanswered publish is not retried, and the result is not held back
// longer.
func (r *reporter) settle() {
	r.mu.Lock()
	f := r.last
	r.mu.Unlock()
	if f == nil {
		return
	}
	select {
	case <-f.Ok():
	case err := <-f.Err():
		r.w.log.Debug("progress event not stored", "call_id", r.call.CallId, "err", err)
	}
}
