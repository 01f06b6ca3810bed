package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/hooks"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The hooks (internal/hooks) are the dispatcher's component: admission
// runs the before-hooks and names the after-hooks in the call; the
// after-hook service is started and stopped with the dispatcher
// (lifecycle.go). The hooks make their own calls through Call.

// newHooks returns the hooks of d.
func newHooks(d *Dispatcher) (*hooks.Hooks, error) {
	return hooks.New(hooks.Config{Bus: d.bus, Specs: d.reg, Policies: d.cfg.Policies, Caller: d,
		ArgLimits:  registry.ArgLimits{MaxBytes: d.cfg.MaxArgsBytes, MaxDepth: d.cfg.MaxArgsDepth, MaxValues: d.cfg.MaxArgsValues},
		ErrStopped: ErrStopped, Logger: d.log})
}

// beforeHooks runs the before-hooks that cover the call. It returns the
// refusal and its decision record, or an ask, or nothing (the call goes
// on, its arguments perhaps rewritten and validated again).
func (d *Dispatcher) beforeHooks(ctx context.Context, id identity.Identity, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall) (*toolwirev1.ToolError, *toolwirev1.PolicyDecision, *asked) {
	v := d.hooks.Before(ctx, id, spec, call)
	if v.Ask == nil {
		return v.Refusal, v.Decision, nil
	}
	return nil, nil, &asked{pd: v.Decision, spec: spec, args: v.Ask.Args, reason: v.Ask.Reason}
}

// isHookCall reports whether ctx is a hook's own call (hooks.IsHookCall):
// no loop guard or limits run on it, and the rules let it call a tool the
// policy binds as a hook.
func isHookCall(ctx context.Context) bool { return hooks.IsHookCall(ctx) }
