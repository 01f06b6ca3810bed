// Package intents is how tools change session state without touching it:
// a tool returns intents, the orchestrator applies them (DESIGN §8).
//
// # Catalog
//
// Built-in types, each with a payload schema (Catalog): END_SESSION,
// SUPPRESS_AUDIO, SUPPRESS_TRANSCRIPT, SET_PENDING_MESSAGE, SET_STATE,
// EMIT_EVENT, NOTIFY, INJECT_CONTEXT. Custom types are namespaced in lower
// case (CustomRe: acme.reindex); their payload is any JSON object. A payload
// is always a JSON object or absent (= {}), at most MaxPayloadBytes.
//
// # Declaration and checking
//
// A tool's spec declares the types it may emit (ToolSpec.intents); the
// worker refuses a spec declaring an unknown type at start-up (CheckSpec)
// and checks every successful result (Check): an undeclared type, a
// malformed payload, a missing or repeated id, or more than MaxPerResponse
// intents turn the response into INTERNAL ("the tool returned invalid
// intents: ...", side effects POSSIBLE, since the tool ran), logged and
// counted in worker.Stats.IntentViolations. Nothing invalid reaches an
// orchestrator.
//
// # How each executor type emits intents
//
//   - native: tool.EmitIntent(ctx, type, payload) or Result.Intents;
//   - mcp: the result's _meta["toolwire/intents"], a JSON array of
//     {"type", "payload"};
//   - http: the response body's field named by HttpConfig.intents_field,
//     or the header named by intents_header, holding the same array;
//   - sandbox: with json_output, the stdout object's field named by
//     SandboxConfig.intents_field.
//
// Executors give ids "i1", "i2", ... in order.
//
// # The reference applier
//
// Applier keeps one Session per tenant and session id in the sessions KV
// bucket. Apply applies the intents of one response in order, in a single
// compare-and-set update retried on conflict, so concurrent appliers (agent
// services, dispatcher replicas) never lose an update. Each intent is
// applied exactly once: its key "<call_id>/<intent_id>" is remembered in
// the session (the most recent ApplierConfig.Remember keys), so a response
// delivered twice — at-least-once delivery, a retried RPC — applies
// nothing the second time. SET_STATE with a null value deletes the key;
// END_SESSION marks the session ended; the suppress flags default to true;
// EMIT_EVENT, NOTIFY, INJECT_CONTEXT and custom intents change no field and
// are recorded, like every applied intent, in the session's log (the most
// recent ApplierConfig.MaxLog).
//
// Orchestrators that keep their own state use pkg/client's Applier
// interface instead.
package intents
