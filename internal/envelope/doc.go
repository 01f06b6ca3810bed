// Package envelope builds the envelopes toolwire answers calls with
// (toolwirev1.ToolResponse) and the tool errors that say why a call did
// not run. Every component that answers a call — the worker, the
// dispatcher at admission, the reaper and the orphan sweeper, approval
// (internal/policy) — builds its responses here, so the envelope version is set in one place (Version)
// and a kind of answer reads the same whoever gives it.
//
// # What is built here
//
//   - OK: the answer of an attempt that returned: the tool's content,
//     structured JSON, intents and _meta.
//   - Error: an answer with ok=false and the error given.
//   - Cancelled: the answer to a call cancelled by its caller or an
//     operator: a CANCELLED error and meta naming who cancelled and why.
//   - Rejection: the dispatcher's answer to a call it refused at
//     admission (meta.source "dispatcher", all times the moment of
//     refusal, duration 0).
//   - PreExec: the error of a call that never ran: not retryable, no
//     partial side effects. Expired is PreExec with EXPIRED.
//   - Interrupted: the CANCELLED error of an attempt cancelled, or of a
//     call handed back at shutdown.
//   - NotRun: the error of a call handed back without running, which may
//     run later (TRANSIENT, retryable, no side effects).
//   - Overloaded: the dispatcher's refusal when it, a pool or a store is
//     overloaded (retryable after retry_after, nothing ran).
//   - Internal: an INTERNAL error of toolwire itself (a stored result it
//     cannot read), effects unknown.
//   - DeadLettered: the answer to a call the dispatcher dead-lettered
//     itself (the reaper, the orphan sweeper; meta.source "dlq").
//
// Argument refusals (VALIDATION) are PreExec errors built by
// registry.CheckArgs and registry.Violation. The one envelope built
// elsewhere is pkg/client's Final for a REJECTED event: a public package
// may not import this one, so it writes version 1 itself, and a test holds
// it equal to Version.
//
// The callers fill ResponseMeta: what it records (the worker, its
// attempt, the isolation gaps of its host) only the component answering
// knows.
package envelope
