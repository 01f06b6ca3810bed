package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// After-hooks (doc.go, "After-hooks"): a call whose attempt ran, and that
// names after-hooks (admission bound them), has its terminal response
// looked at by them before it is stored: after the secrets are redacted
// (a hook never sees them), before the output is cut to its limits (a
// hook sees all of it, and what it redacts never reaches the blob store).
// The hooks are tools, so a dispatcher runs them (bus.AfterHookSubject):
// the worker sends the response, waits for the reply within the hooks'
// timeouts, and applies it. No dispatcher answering within that time is
// each hook's failure: the response is stored unchanged when every hook
// fails open, and withheld otherwise.

// afterHookBackoff bounds the pause before asking again after a busy or
// absent dispatcher.
const afterHookBackoff = 2 * time.Second

// afterHooks returns resp as the call's after-hooks leave it.
func (d *delivery) afterHooks(resp *toolwirev1.ToolResponse) *toolwirev1.ToolResponse {
	call := d.call
	if len(call.AfterHooks) == 0 || !d.ran {
		return resp
	}
	wait := 5 * time.Second
	for _, b := range call.AfterHooks {
		wait += b.GetTimeout().AsDuration() + time.Second
	}
	ctx, cancel := context.WithTimeout(d.ctx, wait)
	defer cancel()
	reply, err := d.w.requestAfterHooks(ctx, call, resp)
	if err != nil {
		reply = &toolwirev1.AfterHookReply{}
		open := true
		for _, b := range call.AfterHooks {
			reply.Notes = append(reply.Notes, &toolwirev1.HookNote{Hook: b.GetId(), Action: "failed", Reason: err.Error()})
			open = open && b.GetFailOpen()
		}
		if !open {
			reply.Withheld = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
				Message:    fmt.Sprintf("the after-hooks could not look at the result (%v); it is withheld (failure: closed)", err),
				Suggestion: "the tool ran: check its effect before calling again"}
		}
		d.log().Warn("after-hooks did not run", "err", err, "withheld", !open)
	}
	return d.applyAfterHooks(resp, reply)
}

// requestAfterHooks asks a dispatcher to run the call's after-hooks, again
// after a busy or absent one, until ctx ends.
func (w *Worker) requestAfterHooks(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) (*toolwirev1.AfterHookReply, error) {
	data, err := proto.Marshal(&toolwirev1.AfterHookRequest{Call: call, Response: resp})
	if err != nil {
		return nil, err
	}
	subject := bus.AfterHookSubject(w.bus.Config)
	pause := 100 * time.Millisecond
	for {
		m, err := w.bus.NC.RequestWithContext(ctx, subject, data)
		if errors.Is(err, nats.ErrMaxPayload) {
			return nil, fmt.Errorf("the response is too large to send to them: %w", err)
		}
		if err == nil {
			var reply toolwirev1.AfterHookReply
			if err = proto.Unmarshal(m.Data, &reply); err != nil {
				return nil, fmt.Errorf("undecodable after-hook reply: %w", err)
			}
			if reply.RetryReason == "" {
				return &reply, nil
			}
			err = errors.New(reply.RetryReason)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("no dispatcher ran them in time: %w", err)
		case <-t.C:
		}
		pause = min(2*pause, afterHookBackoff)
	}
}

// applyAfterHooks applies what the after-hooks made of resp: their notes
// in its meta; new content; or, for a withheld result, an ok response
// turned into the hook's error (intents dropped: the orchestrator gets
// nothing of the result) and a failed one stripped of its content, its
// error kept. A failed call never becomes a success.
func (d *delivery) applyAfterHooks(resp *toolwirev1.ToolResponse, reply *toolwirev1.AfterHookReply) *toolwirev1.ToolResponse {
	if resp.Meta == nil {
		resp.Meta = d.meta()
	}
	resp.Meta.Hooks = reply.Notes
	if te := reply.Withheld; te != nil {
		if !resp.Ok {
			resp.Content, resp.StructuredJson, resp.MetaJson = nil, "", ""
			return resp
		}
		te.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE
		if d.spec.GetAnnotations().GetReadOnly() {
			te.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
		}
		meta := resp.Meta
		resp = d.errorResponse(te)
		resp.Meta = meta
		return resp
	}
	if reply.Changed {
		resp.Content, resp.StructuredJson = reply.Content, reply.StructuredJson
	}
	if reply.Redacted {
		resp.MetaJson = ""
	}
	return resp
}
