package hooks

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/pkg/hook"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bounds of the after-hooks.
const (
	maxHookAnnotations     = 16
	maxHookAnnotationKey   = 64
	maxHookAnnotationValue = 1024
	// maxHookReason bounds the reason an after-hook gives: it is kept in
	// the response's meta and, for a withhold, in its error.
	maxHookReason = 1024
	// maxAfterHooksPerCall bounds the after-hooks one request may name (a
	// policy binds far fewer to a tool).
	maxAfterHooksPerCall = 64
	// maxAfterHookWork bounds the after-hook requests one dispatcher
	// serves at once; past it a request is answered "busy" and the worker
	// asks again (any replica may take it).
	maxAfterHookWork = 256
)

// BindAfter names in the call the after-hooks the policy in force for
// tenant binds to its tool: the worker sends its response to them, and
// the audit shows which looked at it. A hook's own call has none.
func (hs *Hooks) BindAfter(ctx context.Context, tenant string, call *toolwirev1.ToolCall) {
	if IsHookCall(ctx) {
		return
	}
	for _, h := range hs.policyFor(tenant).AfterHooks(call.Tool) {
		call.AfterHooks = append(call.AfterHooks, &toolwirev1.AfterHookBinding{Id: h.ID, Tool: h.Tool,
			Timeout: durationpb.New(h.Timeout), FailOpen: h.FailOpen})
	}
}

// runAfter runs the after-hooks a worker's request's call names, in
// order, as the policy in force binds them now (a hook no longer bound is
// noted "unbound" and skipped), and returns what they made of the
// response.
func (hs *Hooks) runAfter(ctx context.Context, data []byte) *toolwirev1.AfterHookReply {
	var req toolwirev1.AfterHookRequest
	if err := proto.Unmarshal(data, &req); err != nil || req.Call == nil || req.Response == nil {
		return &toolwirev1.AfterHookReply{Withheld: withheld("", fmt.Errorf("undecodable after-hook request"))}
	}
	call, resp := req.Call, req.Response
	tenant := call.GetCaller().GetTenant()
	if !bus.ValidTenant(tenant) {
		return &toolwirev1.AfterHookReply{Withheld: withheld("", fmt.Errorf("the call names no valid tenant"))}
	}
	ent, err := hs.cfg.Specs.GetVersion(ctx, call.Tool, call.SpecVersion)
	if err != nil {
		return &toolwirev1.AfterHookReply{RetryReason: "the tool's spec could not be read: " + err.Error()}
	}
	if len(call.AfterHooks) > maxAfterHooksPerCall {
		return &toolwirev1.AfterHookReply{Withheld: withheld("", fmt.Errorf("the call names %d after-hooks (at most %d)",
			len(call.AfterHooks), maxAfterHooksPerCall))}
	}
	a := &after{hs: hs, p: hs.policyFor(tenant), tenant: tenant, spec: ent.Spec, call: call, resp: resp,
		v: view{content: resp.Content, structured: resp.StructuredJson, input: resp.GetInputRequired() != nil}}
	return a.run(ctx)
}

// after is one response's pass through its call's after-hooks.
type after struct {
	hs     *Hooks
	p      *policy.Policy
	tenant string
	spec   *toolwirev1.ToolSpec
	call   *toolwirev1.ToolCall
	resp   *toolwirev1.ToolResponse
	// v is the response as the hooks so far left it.
	v view
}

// run has each hook the call names look at the response once, and answers
// what they made of it.
func (a *after) run(ctx context.Context) *toolwirev1.AfterHookReply {
	reply := &toolwirev1.AfterHookReply{}
	seen := make(map[string]bool, len(a.call.AfterHooks))
	for _, b := range a.call.AfterHooks {
		if seen[b.GetId()] {
			continue // each hook looks once
		}
		seen[b.GetId()] = true
		h := a.p.Hook(b.GetId())
		if h == nil || !h.After || !h.Covers(a.call.Tool) || a.p.IsHook(a.call.Tool) {
			reply.Notes = append(reply.Notes, &toolwirev1.HookNote{Hook: b.GetId(), Action: "unbound", PolicyVersion: a.p.Version()})
			continue
		}
		note := &toolwirev1.HookNote{Hook: h.ID, PolicyVersion: a.p.Version()}
		reply.Notes = append(reply.Notes, note)
		err := a.look(ctx, h, note)
		if err != nil {
			if ctx.Err() != nil || (a.hs.cfg.ErrStopped != nil && errors.Is(err, a.hs.cfg.ErrStopped)) {
				// Not the hook's failure: another replica runs them.
				return &toolwirev1.AfterHookReply{RetryReason: "the dispatcher is stopping"}
			}
			note.Action, note.Reason = "failed", err.Error()
			if h.FailOpen {
				a.hs.log.WarnContext(ctx, "an after-hook failed; the response goes on (failure: open)", "hook", h.ID, "call_id", a.call.CallId, "err", err)
				continue
			}
			reply.Withheld = withheld(h.ID, err)
			return reply
		}
		if note.Action == string(hook.Withhold) {
			reply.Withheld = &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				Message: fmt.Sprintf("hook %q withheld the result of this call of %q: %s", h.ID, a.call.Tool, note.Reason)}
			return reply
		}
	}
	if a.v.changed {
		reply.Changed, reply.Content, reply.StructuredJson, reply.Redacted = true, a.v.content, a.v.structured, a.v.redacted
	}
	return reply
}

// look calls after-hook h on the response as the hooks so far left it,
// and takes its answer into the view and the hook's note.
func (a *after) look(ctx context.Context, h *policy.Hook, note *toolwirev1.HookNote) error {
	hr, err := a.v.response(a.resp)
	if err != nil {
		return err
	}
	req := hook.AfterRequest{Hook: h.ID, Phase: hook.PhaseAfter, CallID: a.call.CallId, Tool: a.call.Tool, SpecVersion: a.call.SpecVersion,
		Arguments: arguments(a.spec, a.call), Caller: callerOf(a.call), Response: hr}
	var ans hook.AfterAnswer
	if err := a.hs.call(ctx, request{tenant: a.tenant, hook: h, args: req}, &ans); err != nil {
		return err
	}
	return a.v.apply(&ans, note)
}

// withheld is the error of a result withheld because after-hook id
// (none: the request itself) could not look at it.
func withheld(id string, err error) *toolwirev1.ToolError {
	who := "the after-hooks"
	if id != "" {
		who = fmt.Sprintf("after-hook %q", id)
	}
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
		Message:    fmt.Sprintf("%s could not look at the result (%v); it is withheld (failure: closed)", who, err),
		Suggestion: "the tool ran: check its effect before calling again"}
}
