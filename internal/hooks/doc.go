// Package hooks is the hook runtime of a dispatcher (DESIGN §6, "Hooks are
// tools"; docs/policy.md, "Hooks"): the before-hooks admission runs, the
// after-hooks it names in a call, and the service that runs those
// after-hooks for the workers. The JSON a hook gets and answers is
// pkg/hook's.
//
// A dispatcher (internal/dispatch) makes one Hooks with New and gives it
// what it needs of the core through small seams: Caller (the core's Call,
// through which every hook is called), Policies (the policy in force per
// tenant, which binds the hooks) and Specs (the registry). Hooks is a
// startstop.Service: its Start and Stop run the after-hook service, in the
// dispatcher's lifecycle.
//
// # Hooks are calls
//
// A hook is a registered tool the policy in force binds; it is called
// through the core's own Call, as a call of the tenant by agent
// "hook:<id>" with every scope, marked in its context (IsHookCall) so
// that it runs no hooks, loop guard or limits, and is allowed without the
// rules (the operator named it), with the hook's timeout as its
// schedule-to-close and wait (and a second more as its context's
// deadline). Its answer is its structured result, or its first text
// block, as JSON; a call that does not end in time, fails, or answers
// what is not JSON is the hook's failure. A hook never sees the argument
// values the tool's schema marks secret: they reach it as
// redact.Redacted.
//
// # Before-hooks
//
// Before (hooks.go, before.go) runs after the JSON Schema and before the
// policy rules: each hook the policy in force binds to the call's tool is
// called, in priority order. Its answer continues, stops the hooks (allow:
// the rules still decide), denies, asks (unless a rule denies: the core
// decides) or rewrites the arguments, which are checked again against the
// tool's schema and the ArgLimits, and which later hooks and the rules
// see (a rewrite keeps the digest of the caller's arguments in
// ToolCall.caller_args_sha256). Where the issue was silent: a failed hook
// refuses TRANSIENT (retryable) unless its failure is open; an answer
// with an unknown action refuses PERMISSION_DENIED unless its failure is
// open; a hook's refusals and asks are recorded with rule "hook:<id>"; a
// direct call of a hook tool runs no hooks.
//
// # After-hooks
//
// BindAfter (after.go) names in the call the after-hooks the policy binds
// to its tool (ToolCall.after_hooks); the worker that ran it sends its
// response to bus.AfterHookSubject, which every replica serves in one
// queue group (service.go: at most 256 requests at once per replica, each
// on its own goroutine, all ended by Stop; past that "busy", and the
// worker asks again). A request is served only from a worker's inbox (a
// message a push consumer was pointed at the subject carries a $JS.ACK
// reply). The dispatcher calls each named hook that the tenant's policy in
// force still binds to the tool — never a tool the request names on its
// own; another is noted "unbound" — as a before-hook is called, and
// answers the new content, the notes for the response's meta, or the
// error of a withheld result. The response a hook sees (view.go) has its
// content in MCP's form (internal/mcpcontent) as the hooks before it left
// it. Where the issue was silent: "redact" drops what the hook does not
// give back (a redactor that forgets the structured copy of a text does
// not leak it), "replace" keeps it; "withhold" refuses the result; a
// response that asks for input can be passed, annotated or withheld, not
// redacted or replaced; a failed hook withholds the result unless its
// failure is open; a dispatcher that stops while serving answers "retry"
// (another replica serves it), never a hook failure. An answer is taken
// whole or not at all (a failed redaction wipes nothing); a reason is cut
// to 1 KiB; at most 16 annotations, keys 1 to 64 bytes, values at most
// 1 KiB; each hook runs once however often a request names it, and a
// request naming more than 64 is refused; a reply too large to send is
// replaced by one that withholds the result. A hook's own call is not
// held to MaxArgsValues (its arguments carry a whole response; the core
// reads IsHookCall); its bytes and nesting are, as any call's, and the
// hook tool's spec may raise them.
package hooks
