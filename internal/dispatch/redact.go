package dispatch

import (
	"github.com/toolwire/toolwire/internal/redact"
)

// redactRefusal removes the values of the request's secret arguments from
// a refusal (internal/redact) before it is answered, recorded as a
// REJECTED event or shown on a span: a schema error such as `pattern`
// quotes the value it refuses. It runs on refusals only; the schema is
// the one admission checked, and a tool without secret fields costs one
// substring search of its schema.
func (a *admission) redactRefusal() {
	if a.spec == nil {
		return // an unknown or disabled tool: its refusal quotes no argument
	}
	o := a.req
	plan := redact.ForSpec(a.spec)
	if plan == nil {
		return
	}
	args, err := argumentBytes(o)
	if err != nil {
		// Arguments that cannot be encoded: whatever the refusal quotes
		// of them may be secret.
		args = []byte(o.GetArgumentsJson())
	}
	plan.Secrets(args).ToolError(a.refusal)
}
