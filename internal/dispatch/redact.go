package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/redact"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// redactRefusal removes the values of the request's secret arguments from
// a refusal (internal/redact) before it is answered, recorded as a
// REJECTED event or shown on a span: a schema error such as `pattern`
// quotes the value it refuses. It runs on refusals only; the schema is
// the one admission checked (registry entries are cached), and a tool
// without secret fields costs one substring search of its schema.
func (d *Dispatcher) redactRefusal(ctx context.Context, o *toolwirev1.CallRequest, te *toolwirev1.ToolError) {
	ent, err := d.reg.GetVersion(ctx, o.Tool, o.SpecVersion)
	if err != nil {
		return // an unknown tool: its refusal quotes no argument
	}
	plan := redact.ForSpec(ent.Spec)
	if plan == nil {
		return
	}
	args, err := argumentBytes(o)
	if err != nil {
		// Arguments that cannot be encoded: whatever the refusal quotes
		// of them may be secret.
		args = []byte(o.GetArgumentsJson())
	}
	plan.Secrets(args).ToolError(te)
}
