package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// lookup is the first admission step: a tool name is present, the tool is
// in the registry (its current version, or the spec_version the request
// pins), and it is not disabled. A failed registry read answers INTERNAL.
func (a *admission) lookup(ctx context.Context) verdict {
	d := a.d
	o := a.req
	if o.Tool == "" {
		return a.refused(registry.Violation("tool", "tool name is required"), nil)
	}
	ent, err := d.reg.GetVersion(ctx, o.Tool, o.SpecVersion)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, fmt.Sprintf("unknown tool %q", o.Tool))
		if o.SpecVersion != "" {
			te.Message = fmt.Sprintf("unknown tool %q or version %q", o.Tool, o.SpecVersion)
		}
		te.Suggestion = d.unknownToolHint(a.id, o.Tool)
		return a.refused(te, nil)
	case err != nil:
		d.log.Error("registry lookup failed", "tool", o.Tool, "err", err)
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, "registry lookup failed"), nil)
	}
	if ent.Spec.Disabled {
		return a.refused(envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			fmt.Sprintf("tool %q is disabled: %s", o.Tool, ent.Spec.DisabledReason)), nil)
	}
	a.entry, a.spec = ent, ent.Spec
	return next
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
