package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/hook"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Verdict is what the before-hooks made of a call: nothing (the zero
// Verdict: the call goes on, its arguments perhaps rewritten and
// validated again), a refusal, or an ask.
type Verdict struct {
	// Refusal is the error the call is refused with; nil = not refused.
	Refusal *toolwirev1.ToolError
	// Decision is the decision record of a refusal or an ask (rule
	// "hook:<id>").
	Decision *toolwirev1.PolicyDecision
	// Ask is set when a hook asks: the call is parked for an approver
	// unless a rule denies it. The call is stamped with Decision's version
	// and rule.
	Ask *Ask
}

// Ask is a before-hook's ask.
type Ask struct {
	// Args are the call's arguments, parsed (the approval binds them).
	Args *policy.Args
	// Reason is what the caller is told the approval is for.
	Reason string
}

// Before runs the before-hooks the policy in force for id's tenant binds
// to the call's tool, in priority order, and returns what they made of
// the call. A rewrite replaces call.Arguments. No hook runs on a hook's
// own call (IsHookCall).
func (hs *Hooks) Before(ctx context.Context, id identity.Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) Verdict {
	if IsHookCall(ctx) {
		return Verdict{}
	}
	b := &before{hs: hs, p: hs.policyFor(id.Tenant), tenant: id.Tenant, spec: spec, call: call}
	for _, h := range b.p.BeforeHooks(call.Tool) {
		if v, done := b.look(ctx, h); done {
			return v
		}
	}
	return Verdict{}
}

// before is one call's pass through its before-hooks.
type before struct {
	hs     *Hooks
	p      *policy.Policy
	tenant string
	spec   *toolwirev1.ToolSpec
	call   *toolwirev1.ToolCall
}

// look has hook h look at the call and acts on its answer; done when no
// later hook runs (a refusal, an ask or an allow).
func (b *before) look(ctx context.Context, h *policy.Hook) (v Verdict, done bool) {
	ans, err := b.answer(ctx, h)
	if err != nil {
		if h.FailOpen {
			b.hs.log.WarnContext(ctx, "a before-hook failed; the call goes on (failure: open)", "hook", h.ID, "call_id", b.call.CallId, "err", err)
			return Verdict{}, false
		}
		te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true,
			Message:            fmt.Sprintf("hook %q could not look at this call: %v", h.ID, err),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
		return b.refuse(h, te, te.Message), true
	}
	reason := ans.Reason
	if reason == "" {
		reason = "hook " + h.ID
	}
	switch ans.Action {
	case "", hook.Continue:
	case hook.Allow:
		return Verdict{}, true
	case hook.Deny:
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("hook %q denies this call of %q: %s", h.ID, b.call.Tool, reason))
		return b.refuse(h, te, reason), true
	case hook.Ask:
		args, err := policy.ParseArgs(b.call.Arguments)
		if err != nil {
			return b.refuse(h, invalidRewrite(h, err), err.Error()), true
		}
		pd := decision(b.p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_ASK, reason)
		b.call.PolicyVersion, b.call.PolicyRule = pd.Version, pd.RuleId
		return Verdict{Decision: pd, Ask: &Ask{Args: args, Reason: reason}}, true
	case hook.Rewrite:
		if te := b.rewrite(ctx, h, ans.Arguments); te != nil {
			return b.refuse(h, te, te.Message), true
		}
	default:
		err := fmt.Errorf("unknown action %q", ans.Action)
		if h.FailOpen {
			b.hs.log.WarnContext(ctx, "a before-hook answered nonsense; the call goes on (failure: open)", "hook", h.ID, "err", err)
			return Verdict{}, false
		}
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, fmt.Sprintf("hook %q: %v", h.ID, err))
		return b.refuse(h, te, te.Message), true
	}
	return Verdict{}, false
}

// answer calls before-hook h on the call and reads its answer.
func (b *before) answer(ctx context.Context, h *policy.Hook) (*hook.BeforeAnswer, error) {
	var ans hook.BeforeAnswer
	req := hook.BeforeRequest{Hook: h.ID, Tool: b.call.Tool, SpecVersion: b.spec.GetVersion(),
		Arguments: arguments(b.spec, b.call), Caller: callerOf(b.call)}
	if err := b.hs.call(ctx, request{tenant: b.tenant, hook: h, args: req}, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// refuse is the verdict of a call hook h refused with te, recorded with
// reason.
func (b *before) refuse(h *policy.Hook, te *toolwirev1.ToolError, reason string) Verdict {
	return Verdict{Refusal: te, Decision: decision(b.p, h, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, reason)}
}

// rewrite replaces the call's arguments with the hook's, validated against
// the tool's schema and limits again (the rules then see them).
func (b *before) rewrite(ctx context.Context, h *policy.Hook, args json.RawMessage) *toolwirev1.ToolError {
	if len(args) == 0 {
		return invalidRewrite(h, errors.New("a rewrite without arguments"))
	}
	call := b.call
	ent, err := b.hs.cfg.Specs.GetVersion(ctx, call.Tool, call.SpecVersion)
	if err != nil {
		return envelope.Overloaded("the tool's spec could not be read to check a hook's rewrite", time.Second)
	}
	if te := registry.CheckArgs(ent, args, b.hs.cfg.ArgLimits); te != nil {
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
	return envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, fmt.Sprintf("hook %q: %v", h.ID, err))
}

// decision is the decision record of a call a hook decided.
func decision(p *policy.Policy, h *policy.Hook, outcome toolwirev1.PolicyOutcome, reason string) *toolwirev1.PolicyDecision {
	return &toolwirev1.PolicyDecision{Outcome: outcome, Version: p.Version(), RuleId: "hook:" + h.ID, Reason: reason}
}
