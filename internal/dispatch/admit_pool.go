package dispatch

import (
	"context"
	"fmt"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/poolview"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// pool is the step that refuses, NOT_FOUND, a call of a tool no pool
// consumer filters (poolview.Pools keeps the view of the consumers): it
// would never run. With Config.PoolCheck negative it admits all. A
// version the call's session pins that no pool serves is refused so too,
// saying how to clear the pin: never run as another version.
func (a *admission) poolStep(ctx context.Context) verdict {
	d := a.d
	if d.pools == nil {
		return next
	}
	spec := a.spec
	if d.pools.Served(ctx, poolview.ToolKey{Executor: spec.Executor, Provider: spec.Provider, Name: spec.Name}, a.id.Tenant, a.entry.Seen) {
		return next
	}
	subject := d.subj.Call(spec.Executor, a.id.Tenant, spec.Provider, spec.Name)
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
		fmt.Sprintf("tool %q has no worker pool: no pool consumer takes its calls (%s), so it would never run", spec.Name, subject))
	te.Suggestion = "start a worker that serves the tool (a worker creates its pool's consumer when it starts; " +
		"`worker --ensure-only` creates it for a pool scaled to zero)"
	if a.pinned != "" {
		te = a.pinGone(fmt.Sprintf("spec version %q of tool %q, which session %q pins, has no worker pool: no pool consumer takes its calls (%s)",
			a.pinned, spec.Name, cutName(a.req.Session), subject))
	}
	return a.refused(te, nil)
}
