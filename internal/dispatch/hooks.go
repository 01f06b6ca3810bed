package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/redact"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Before-hooks (doc.go, "Hooks"): after the JSON Schema, before the
// policy rules (DESIGN §6), the dispatcher calls each hook the policy in
// force binds to the call's tool — a registered tool, called through the
// fleet like any call, so it is validated, queued, retried, traced and
// audited — in priority order, and acts on its answer.

// HookRequest is what a before-hook gets as its arguments.
type HookRequest struct {
	Hook        string          `json:"hook"`
	Tool        string          `json:"tool"`
	SpecVersion string          `json:"spec_version"`
	Arguments   json.RawMessage `json:"arguments"`
	Caller      HookCaller      `json:"caller"`
}

// HookCaller is the caller of the call a hook looks at.
type HookCaller struct {
	Tenant  string `json:"tenant"`
	Agent   string `json:"agent"`
	Session string `json:"session,omitempty"`
	User    string `json:"user,omitempty"`
	Run     string `json:"run,omitempty"`
}

// HookAnswer is a before-hook's answer: its structured result, or its
// first text block, as JSON.
type HookAnswer struct {
	// Action is continue (the next hook; the default), allow (no more
	// hooks; the rules still decide), ask (park the call for an
	// approver), deny, or rewrite (replace the arguments with Arguments).
	Action    string          `json:"action"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// hookCallKey marks the context of a hook's own call: hooks, the loop
// guard and the limits never run on it (no recursion, and a hook call is
// the fleet's own work).
type hookCallKey struct{}

func isHookCall(ctx context.Context) bool { return ctx.Value(hookCallKey{}) != nil }

// beforeHooks runs the before-hooks that cover the call. It returns the
// refusal and its decision record, or an ask, or nothing (the call goes
// on, its arguments perhaps rewritten and validated again).
func (d *Dispatcher) beforeHooks(ctx context.Context, id identity.Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) (*toolwirev1.ToolError, *toolwirev1.PolicyDecision, *asked) {
	if isHookCall(ctx) {
		return nil, nil, nil
	}
	p := d.policyFor(id.Tenant)
	hs := p.BeforeHooks(call.Tool)
	for _, h := range hs {
		ans, err := d.callHook(ctx, id, h, spec, call)
		if err != nil {
			if h.FailOpen {
				d.log.WarnContext(ctx, "a before-hook failed; the call goes on (failure: open)", "hook", h.ID, "call_id", call.CallId, "err", err)
				continue
			}
			te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true,
				Message:            fmt.Sprintf("hook %q could not look at this call: %v", h.ID, err),
				PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
			return te, hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, te.Message), nil
		}
		reason := ans.Reason
		if reason == "" {
			reason = "hook " + h.ID
		}
		switch ans.Action {
		case "", "continue":
		case "allow":
			return nil, nil, nil
		case "deny":
			te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				fmt.Sprintf("hook %q denies this call of %q: %s", h.ID, call.Tool, reason))
			return te, hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, reason), nil
		case "ask":
			args, err := policy.ParseArgs(call.Arguments)
			if err != nil {
				return invalidRewrite(h, err), hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, err.Error()), nil
			}
			pd := hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ASK, reason)
			call.PolicyVersion, call.PolicyRule = pd.Version, pd.RuleId
			return nil, nil, &asked{pd: pd, spec: spec, args: args, reason: reason}
		case "rewrite":
			if te := d.rewrite(ctx, h, call, ans.Arguments); te != nil {
				return te, hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, te.Message), nil
			}
		default:
			err := fmt.Errorf("unknown action %q", ans.Action)
			if h.FailOpen {
				d.log.WarnContext(ctx, "a before-hook answered nonsense; the call goes on (failure: open)", "hook", h.ID, "err", err)
				continue
			}
			te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, fmt.Sprintf("hook %q: %v", h.ID, err))
			return te, hookDecision(p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, te.Message), nil
		}
	}
	return nil, nil, nil
}

// callHook calls before-hook h on the call and reads its answer.
func (d *Dispatcher) callHook(ctx context.Context, id identity.Identity, h *policy.Hook, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) (*HookAnswer, error) {
	var ans HookAnswer
	req := HookRequest{Hook: h.ID, Tool: call.Tool, SpecVersion: spec.GetVersion(), Arguments: hookArguments(spec, call), Caller: hookCaller(call)}
	if err := d.hookCall(ctx, id.Tenant, h, req, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// hookArguments are the call's arguments as a hook sees them: a hook
// never sees the values the tool's schema marks secret (a hook may be a
// third party's webhook, and its call is stored and audited like any):
// they reach it as redact.Redacted.
func hookArguments(spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) json.RawMessage {
	if plan := redact.ForSpec(spec); plan != nil {
		return plan.Arguments(call.Arguments)
	}
	return json.RawMessage(call.Arguments)
}

func hookCaller(call *toolwirev1.ToolCall) HookCaller {
	c := call.GetCaller()
	return HookCaller{Tenant: c.GetTenant(), Agent: c.GetAgent(), Session: c.GetSession(), User: c.GetUser(), Run: c.GetRun()}
}

// hookCall calls hook h of tenant's policy through the fleet with req as
// its arguments, and reads its answer into ans: the hook's structured
// result, or its first text block, as JSON. The call is the fleet's own
// (agent "hook:<id>"): hooks, the loop guard and the limits never run on
// it, and it is bounded by the hook's timeout.
func (d *Dispatcher) hookCall(ctx context.Context, tenant string, h *policy.Hook, req, ans any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(context.WithValue(ctx, hookCallKey{}, h.ID), h.Timeout+time.Second)
	defer cancel()
	hid := identity.Identity{Tenant: tenant, Agent: "hook:" + h.ID, Scopes: []string{"*"}}
	r, err := d.Call(hctx, hid, &toolwirev1.CallRequest{Tool: h.Tool, ArgumentsJson: string(data),
		ScheduleToClose: durationpb.New(h.Timeout)}, h.Timeout)
	if err != nil {
		return err
	}
	if r.State != toolwirev1.CallState_CALL_STATE_DONE {
		return fmt.Errorf("no answer within %s", h.Timeout)
	}
	if !r.Response.GetOk() {
		e := r.Response.GetError()
		return fmt.Errorf("%s: %s", e.GetType(), e.GetMessage())
	}
	raw := r.Response.GetStructuredJson()
	if raw == "" {
		for _, ct := range r.Response.GetContent() {
			if t := ct.GetText(); t != nil {
				raw = t.GetText()
				break
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), ans); err != nil {
		return fmt.Errorf("its answer is not a hook answer (JSON with an action): %w", err)
	}
	return nil
}

// rewrite replaces the call's arguments with the hook's, validated against
// the tool's schema and limits again (the rules then see them).
func (d *Dispatcher) rewrite(ctx context.Context, h *policy.Hook, call *toolwirev1.ToolCall, args json.RawMessage) *toolwirev1.ToolError {
	if len(args) == 0 {
		return invalidRewrite(h, errors.New("a rewrite without arguments"))
	}
	ent, err := d.reg.GetVersion(ctx, call.Tool, call.SpecVersion)
	if err != nil {
		return envelope.Overloaded("the tool's spec could not be read to check a hook's rewrite", time.Second)
	}
	if te := d.checkArgs(ctx, ent, args); te != nil {
		te.Message = fmt.Sprintf("hook %q rewrote the arguments into ones the tool refuses: %s", h.ID, te.Message)
		return te
	}
	if len(call.CallerArgsSha256) == 0 {
		// An input-required answer binds the arguments the caller sent
		// (admitted: they parse).
		call.CallerArgsSha256, _ = policy.ArgsDigest(call.Arguments)
	}
	call.Arguments = []byte(args)
	return nil
}

func invalidRewrite(h *policy.Hook, err error) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, fmt.Sprintf("hook %q: %v", h.ID, err))
	return te
}

// hookDecision is the decision record of a call a hook decided.
func hookDecision(p *policy.Policy, h *policy.Hook, outcome toolwirev1.PolicyOutcome, reason string) *toolwirev1.PolicyDecision {
	return &toolwirev1.PolicyDecision{Outcome: outcome, Version: p.Version(), RuleId: "hook:" + h.ID, Reason: reason}
}
