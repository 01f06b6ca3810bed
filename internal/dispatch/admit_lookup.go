package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/shellquote"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// lookup is the admission step after the session step: a tool name is
// present, the tool is in the registry (its current version, the
// spec_version the request names, or the version the call's session pins:
// resolveVersion), and it is not disabled. A failed registry read answers
// INTERNAL.
func (a *admission) lookup(ctx context.Context) verdict {
	d := a.d
	o := a.req
	if o.Tool == "" {
		return a.refused(registry.Violation("tool", "tool name is required"), nil)
	}
	version, v := a.resolveVersion()
	if v != next {
		return v
	}
	ent, err := d.reg.GetVersion(ctx, o.Tool, version)
	switch {
	case errors.Is(err, registry.ErrNotFound) && a.pinned != "":
		return a.refused(a.pinGone(fmt.Sprintf("spec version %q of tool %q, which session %q pins, is no longer in the registry",
			a.pinned, o.Tool, cutName(o.Session))), nil)
	case errors.Is(err, registry.ErrNotFound):
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, fmt.Sprintf("unknown tool %q", o.Tool))
		if o.SpecVersion != "" {
			te.Message = fmt.Sprintf("unknown tool %q or version %q", o.Tool, o.SpecVersion)
		}
		te.Suggestion = a.unknownToolHint(ctx)
		return a.refused(te, nil)
	case err != nil:
		d.log.Error("registry lookup failed", "tool", o.Tool, "err", err)
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "registry lookup failed"), nil)
	}
	if ent.Spec.Disabled {
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			fmt.Sprintf("tool %q is disabled: %s", o.Tool, ent.Spec.DisabledReason))
		if a.pinned != "" {
			te = a.pinGone(fmt.Sprintf("spec version %q of tool %q, which session %q pins, is disabled: %s",
				a.pinned, o.Tool, cutName(o.Session), ent.Spec.DisabledReason))
		}
		return a.refused(te, nil)
	}
	a.entry, a.spec = ent, ent.Spec
	return next
}

// resolveVersion is the spec version the call runs ("" = the current
// one): the request's spec_version, or, when the call's session pins
// versions (pinsVersions) and pins one for the tool, that one (a.pinned).
// A spec_version other than the session's pin is refused CONFLICT: the
// session runs one version of a tool until the orchestrator clears the
// pin. With pinning in force and no pin yet, a.pin is set: the pin step
// (admit_pin.go) pins the version lookup resolves.
func (a *admission) resolveVersion() (string, verdict) {
	o := a.req
	if !a.pinsVersions() {
		return o.SpecVersion, next
	}
	pin, ok := a.session.Pinned(o.Tool)
	if !ok {
		a.pin = true
		return o.SpecVersion, next
	}
	if o.SpecVersion != "" && o.SpecVersion != pin {
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT,
			fmt.Sprintf("session %q pins spec version %q of tool %q; the call asks for version %q",
				cutName(o.Session), pin, o.Tool, cutName(o.SpecVersion)))
		te.Suggestion = repinHint(o.Session, o.Tool) + ", or leave spec_version empty to run the pinned version"
		return "", a.refused(te, nil)
	}
	a.pinned = pin
	return pin, next
}

// pinsVersions reports whether the call's session pins spec versions: the
// call names a session, and the request asks for it
// (pin_session_versions) or a layer of the policy in force for the caller
// does (sessions.pin_versions, which may be its mode's). Without a
// session, or with a policy that pins nothing, it reads nothing.
func (a *admission) pinsVersions() bool {
	o := a.req
	if o.Session == "" {
		return false
	}
	if o.PinSessionVersions {
		return true
	}
	p := a.d.policyFor(a.id.Tenant)
	if !p.PinsAnyVersions() {
		return false
	}
	c := callerOf(a.id, o)
	c.Mode = a.session.Mode
	return p.PinsVersions(c)
}

// pinGone is the refusal of a call whose session pins a version that
// cannot run any more (msg says why): never swapped for another version,
// the session's pin stays until the orchestrator clears it.
func (a *admission) pinGone(msg string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, msg+"; a pinned version is never swapped for another")
	te.Suggestion = repinHint(a.req.Session, a.req.Tool) + " to run the version current then"
	return te
}

// repinHint says how to clear a session's pin of tool: a command to
// copy, each name one shell word (shellquote: a session name may hold
// spaces, `;` or `$()`). A session name longer than cutName keeps is
// named cut, and no command is given (it would name another session).
func repinHint(session, tool string) string {
	if cut := cutName(session); cut != session {
		return fmt.Sprintf("clear the session's pin of %q (the ClearSessionPins RPC, admin scope; `toolctl session repin SESSION TOOL`)", tool)
	}
	return fmt.Sprintf("clear the pin (`toolctl session repin %s %s`, the ClearSessionPins RPC, admin scope)", shellquote.Quote(session), shellquote.Quote(tool))
}

// unknownToolHint suggests the tools the caller may have meant, among
// those ListTools shows it for the call's session mode and model (so
// never one the model's toolset or the spec's definition hides, nor one
// the mode forbids), and how to list them all.
func (a *admission) unknownToolHint(ctx context.Context) string {
	const list = "list the tools you can call with `toolctl tools list` (the ListTools RPC)"
	name, model := a.req.Tool, a.req.Model
	if len(model) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(model) {
		model = "" // not a model name: refused VALIDATION once the tool is known
	}
	visible := a.d.visibleTools(ctx, a.id, registry.Filter{}, listedFor{mode: a.session.Mode, model: model, pins: a.session.Pins})
	names := make([]string, 0, len(visible))
	for _, spec := range visible {
		names = append(names, spec.Name)
	}
	if similar := registry.Similar(name, names); len(similar) > 0 {
		return "did you mean " + strings.Join(similar, " or ") + "? " + list
	}
	return list
}
