// Package hook is the contract between toolwire's dispatchers and the
// hooks policy documents bind (docs/policy.md, "Hooks"): the JSON a hook
// gets as its arguments and the JSON it answers with.
//
// # Hooks are tools
//
// A hook is any registered tool — native, HTTP webhook, MCP, sandbox —
// that a policy document binds to a phase, a tools glob, a priority, a
// timeout and a failure mode:
//
//	hooks:
//	  - {id: secrets, phase: before, tool: scan_secrets, tools: ["*"]}
//	  - {id: pii, phase: after, tool: redact_pii, tools: ["*"], failure: open}
//
// The dispatcher calls the hook tool through the fleet like any call, with
// a request as its arguments, and reads its answer from the call's
// structured result or, when it has none, its first text block, as JSON.
// A native hook is therefore one typed function of pkg/tool:
//
//	tool.New("scan_secrets", func(ctx context.Context, in hook.BeforeRequest) (hook.BeforeAnswer, error) {
//		...
//		return hook.BeforeAnswer{Action: hook.Continue}, nil
//	}, tool.ReadOnly(), tool.Idempotent())
//
// and an HTTP webhook decodes a request body and encodes an answer.
//
// # Before-hooks
//
// A before-hook looks at a call after its arguments pass the tool's JSON
// Schema and before the policy rules decide. It gets a BeforeRequest (the
// arguments the tool's schema marks secret arrive as "[REDACTED]") and
// answers a BeforeAnswer: Continue (the default), Allow, Ask, Deny or
// Rewrite.
//
// # After-hooks
//
// An after-hook looks at a call's response before it is stored. It gets an
// AfterRequest whose Response holds the content blocks in MCP's form
// (`[{"type":"text","text":…}]`) and answers an AfterAnswer: Continue (the
// default), Annotate, Redact, Replace or Withhold. A failed call never
// becomes a success: whatever a hook answers, its ok and error stay.
//
// The JSON field names are the contract; the Go types are a convenience
// for hooks written in Go, and every field is plain JSON.
package hook
