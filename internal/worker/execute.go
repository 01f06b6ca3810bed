package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/redact"
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
	rep := newReporter(d.w, call, started)
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
	ex.d, ex.ctx, ex.rep = d, ctx, rep
	d.reg.begin(ex)
	res, err = d.w.run(ctx, call, spec)
	if !d.reg.end(ex) {
		rep.close() // the watchdog closed it already
		d.w.stats.abandonedRunning.Add(-1)
		return nil, nil, true
	}
	// The progress the tool reported is stored before its result is
	// published: a Watch that finds the result finds every PROGRESS too,
	// and none comes after it (close). Waited for once the tool has
	// returned (reg.end), so that the wait does not count towards the
	// watchdog's.
	rep.close()
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
// and heartbeats (a tool.PartialReporter). It is closed when the attempt
// ends (settled or abandoned): later events are not published.
type reporter struct {
	w       *Worker
	call    *toolwirev1.ToolCall
	started *delayed.Record
	timer   *time.Timer
	every   time.Duration
	// sec are the call's secrets; hold is how many bytes of partial text
	// are held back (the longest secret form's length less one, 0 when
	// the call has no secrets), so that no secret split across chunks is
	// stored in pieces.
	sec  *redact.Secrets
	hold int

	mu sync.Mutex
	// last is the acknowledgement of the newest PROGRESS event published
	// by JetStream (nil: none; an event that fell back to a core publish
	// leaves it as it was).
	last   jetstream.PubAckFuture
	closed bool
	// seq is the partial_seq of the last chunk published; held is the
	// partial text held back, already redacted up to its unfinished tail.
	seq  uint32
	held string
}

// newReporter returns the reporter of an attempt of call.
func newReporter(w *Worker, call *toolwirev1.ToolCall, started *delayed.Record) *reporter {
	sec := w.secretsOf(call)
	return &reporter{w: w, call: call, started: started, sec: sec, hold: max(sec.Longest()-1, 0)}
}

// Progress publishes a PROGRESS event without waiting for the events
// stream to store it (publishProgress); settle waits for the last one.
func (r *reporter) Progress(message string, percent float64) {
	r.Heartbeat()
	ev := &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Message: message}
	if percent >= 0 {
		ev.Percent = &percent
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.publish(ev)
	}
}

// Heartbeat resets the tool's heartbeat timeout.
func (r *reporter) Heartbeat() {
	if r.timer != nil {
		r.timer.Reset(r.every)
	}
}

// Partial publishes a chunk of the tool's partial output (tool.Partial,
// which bounds the chunks) as a PROGRESS event with CallEvent.partial,
// the same way as Progress: signed, redacted, and stored before the
// result (settle). The text is redacted over what was held back joined
// with this chunk's (holdBack). The worker numbers the chunks it
// publishes (partial_seq): a chunk whose text is all held back is not
// published, and the text held back at the end is a chunk of its own
// (close).
func (r *reporter) Partial(_ uint32, content []*toolwirev1.Content) error {
	r.Heartbeat()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return tool.ErrPartialClosed
	}
	if content = r.holdBack(content); len(content) > 0 {
		r.seq++
		r.publish(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, Partial: content, PartialSeq: r.seq})
	}
	return nil
}

// holdBack returns the blocks of a chunk to publish: each text block's
// text is the text held back joined with its own, redacted over the join,
// less its last r.hold bytes (to a rune boundary), which are held back in
// turn; a text block left empty is dropped. Other blocks are redacted as
// they are (publishProgress). r.mu is held.
func (r *reporter) holdBack(content []*toolwirev1.Content) []*toolwirev1.Content {
	if r.hold == 0 {
		return content
	}
	out := content[:0:0]
	for _, c := range content {
		t := c.GetText()
		if t == nil {
			out = append(out, c)
			continue
		}
		s := r.sec.String(r.held + t.Text)
		cut := max(len(s)-r.hold, 0)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		r.held = s[cut:]
		if cut > 0 {
			t.Text = s[:cut] // the block is the reporter's (tool.Partial copied it)
			out = append(out, c)
		}
	}
	return out
}

// publish publishes a PROGRESS event ev, after STARTED. r.mu is held.
func (r *reporter) publish(ev *toolwirev1.CallEvent) {
	r.started.Flush() // STARTED precedes the first progress event
	// An event that fell back to a core publish has no acknowledgement:
	// the earlier one's is still the one to wait for.
	if f := r.w.publishProgress(r.call, ev); f != nil {
		r.last = f
	}
}

// close ends the attempt's reporting: the partial text held back is
// published as a last chunk, and nothing is published after it (Partial
// returns tool.ErrPartialClosed). Called before the result is published
// (then settle) and when the watchdog abandons the attempt; closing again
// does nothing.
func (r *reporter) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if r.held != "" {
		r.seq++
		r.publish(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS,
			Partial: []*toolwirev1.Content{tool.Text(r.held)}, PartialSeq: r.seq})
		r.held = ""
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
