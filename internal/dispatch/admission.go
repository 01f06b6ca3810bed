package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// admit runs the admission pipeline: tool lookup → disabled → scopes →
// a pool consumes it (poolcheck.go) → size and depth → JSON Schema →
// before-hooks (internal/hooks) → policy and approval (policy.go) → the loop
// guard (loopguard.go); the after-hooks that will look at its response
// are named in the call (internal/hooks). It returns the call to publish, or the
// error to answer with, and the policy decision when the policy step was
// reached (to record); nothing is published on error. An ask (or a call
// an approval token covers) also returns what is left to do instead of a
// plain publish (asked: approve.go). Errors raised here are never
// retryable and have no side effects.
func (d *Dispatcher) admit(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, callID string, now time.Time) (*toolwirev1.ToolCall, *toolwirev1.ToolError, *toolwirev1.PolicyDecision, *asked) {
	call, spec, te := d.check(ctx, id, o, callID, now)
	if te != nil {
		return nil, te, nil, nil
	}
	d.hooks.BindAfter(ctx, id.Tenant, call)
	te, hpd, hookAsk := d.beforeHooks(ctx, id, spec, call)
	if te != nil {
		return nil, te, hpd, nil
	}
	pd, te, ask := d.applyPolicy(ctx, id, spec, call, now)
	if te != nil {
		return nil, te, pd, nil
	}
	if ask == nil && hookAsk != nil {
		// A hook asks and no rule denies (deny wins).
		return call, nil, hookAsk.pd, hookAsk
	}
	if ask == nil {
		if pd, te, ask = d.loopGuard(ctx, spec, call, pd); te != nil {
			return nil, te, pd, nil
		}
	}
	return call, nil, pd, ask
}

// check runs the admission steps before the policy: it returns the call
// as it would be published and the tool's spec, or the refusal.
func (d *Dispatcher) check(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, callID string, now time.Time) (*toolwirev1.ToolCall, *toolwirev1.ToolSpec, *toolwirev1.ToolError) {
	if o.Tool == "" {
		return nil, nil, registry.Violation("tool", "tool name is required")
	}
	ent, err := d.reg.GetVersion(ctx, o.Tool, o.SpecVersion)
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, fmt.Sprintf("unknown tool %q", o.Tool))
			if o.SpecVersion != "" {
				te.Message = fmt.Sprintf("unknown tool %q or version %q", o.Tool, o.SpecVersion)
			}
			te.Suggestion = d.unknownToolHint(id, o.Tool)
			return nil, nil, te
		}
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "registry lookup failed")
		d.log.Error("registry lookup failed", "tool", o.Tool, "err", err)
		return nil, nil, te
	}
	spec := ent.Spec
	if spec.Disabled {
		return nil, nil, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, fmt.Sprintf("tool %q is disabled: %s", o.Tool, spec.DisabledReason))
	}
	if !registry.HasScopes(id.Scopes, spec.Scopes) {
		return nil, nil, envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("tool %q needs scopes %s", o.Tool, strings.Join(spec.Scopes, ", ")))
	}
	if te := d.checkPool(ctx, id, ent); te != nil {
		return nil, nil, te
	}
	args, err := argumentBytes(o)
	if err != nil {
		return nil, nil, registry.Violation("", err.Error())
	}
	if te := d.checkArgs(ctx, ent, args); te != nil {
		return nil, nil, te
	}
	input, te := d.input(ctx, id, o, spec.Version, args, now)
	if te != nil {
		return nil, nil, te
	}

	call := &toolwirev1.ToolCall{
		CallId: callID, Tool: spec.Name, SpecVersion: spec.Version, Arguments: args,
		Caller: callerOf(id, o), IdempotencyKey: o.IdempotencyKey, AcceptedAt: timestamppb.New(now),
		ApprovalToken: o.ApprovalToken, Dispatcher: d.cfg.Name, Executor: spec.Executor, Provider: spec.Provider,
		Input: input, ClientCapabilitiesJson: o.ClientCapabilitiesJson,
	}
	t := spec.GetTimeouts()
	if s2s := tighter(t.GetScheduleToStart().AsDuration(), o.ScheduleToStart.AsDuration()); s2s > 0 {
		call.ScheduleToStartDeadline = timestamppb.New(now.Add(s2s))
	}
	if s2c := tighter(t.GetScheduleToClose().AsDuration(), o.ScheduleToClose.AsDuration()); s2c > 0 {
		call.Deadline = timestamppb.New(now.Add(s2c))
	}
	return call, spec, nil
}

// checkArgs checks a call's arguments (registry.CheckArgs) against the
// size and nesting limits (the tool spec's, else the Config's), the count
// of members and elements (Config.MaxArgsValues), and the tool's input
// schema; it returns the refusal, or nil. A hook's own call is not held to
// MaxArgsValues: its arguments are the dispatcher's request, holding the
// hooked call's arguments and, for an after-hook, its whole response,
// which no such count limits (the bytes and the nesting still bound it:
// the hook tool's spec may raise them).
func (d *Dispatcher) checkArgs(ctx context.Context, ent *registry.Entry, args []byte) *toolwirev1.ToolError {
	l := registry.ArgLimits{MaxBytes: d.cfg.MaxArgsBytes, MaxDepth: d.cfg.MaxArgsDepth, MaxValues: d.cfg.MaxArgsValues}
	if isHookCall(ctx) {
		l.MaxValues = 0
	}
	return registry.CheckArgs(ent, args, l)
}

// tighter returns the smaller positive duration; 0 when neither is set.
func tighter(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// unknownToolHint suggests the tools the caller may have meant (among
// those it can see), and how to list them all.
func (d *Dispatcher) unknownToolHint(id identity.Identity, name string) string {
	const list = "list the tools you can call with `toolctl tools list` (the ListTools RPC)"
	visible := d.visibleEntries(id, d.reg.List(registry.Filter{Scopes: id.Scopes}))
	names := make([]string, 0, len(visible))
	for _, e := range visible {
		names = append(names, e.Spec.Name)
	}
	if similar := registry.Similar(name, names); len(similar) > 0 {
		return "did you mean " + strings.Join(similar, " or ") + "? " + list
	}
	return list
}
