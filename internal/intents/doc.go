// Package intents is how tools change session state without touching it:
// a tool returns intents, the orchestrator applies them (DESIGN §8).
//
// # Catalog
//
// Built-in types, each with a payload schema (Catalog): END_SESSION,
// SUPPRESS_AUDIO, SUPPRESS_TRANSCRIPT, SET_PENDING_MESSAGE, SET_STATE,
// EMIT_EVENT, NOTIFY, INJECT_CONTEXT, SET_MODE. Custom types are namespaced in lower
// case (CustomRe: acme.reindex); their payload is any JSON object. A payload
// is always a JSON object or absent (= {}), at most MaxPayloadBytes.
//
// # Declaration and checking
//
// A tool's spec declares the types it may emit (ToolSpec.intents). One
// check, Screen, decides every intent, one at a time: its type is in the
// catalog (a built-in type or a namespaced custom one, CheckType) and
// declared by the spec, its id is present and not repeated, its payload is
// a JSON object matching the type's schema, and at most MaxPerResponse
// intents come before it. It runs in two places:
//
//   - in the worker, on every successful result (Check, built on Screen):
//     any refused intent turns the response into INTERNAL ("the tool
//     returned invalid intents: ...", side effects POSSIBLE, since the
//     tool ran), logged and counted in worker.Stats.IntentViolations. The
//     worker also refuses a spec declaring an unknown type at start-up
//     (CheckSpec);
//   - where intents are applied (Applier.Apply), against the spec version
//     the caller passes (Response.Spec). The caller takes it, and the
//     session, from the call as admitted, never from the result (the
//     dispatcher: internal/dispatch, "Intents"), so a result stored by
//     anyone who can publish on the results subjects (a worker
//     credential, a compromised tool host) changes only its own call's
//     session, and only by intents that call's spec version declares.
//
// The worker's check keeps invalid intents from well-behaved workers out
// of every answer; the applier's check is the guard of the session state.
// An orchestrator applying a result's intents itself (pkg/client's
// Applier) gets them as stored and does its own checking.
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
// bucket. Apply screens the intents of one response against the tool's
// spec version (Screen; every intent is refused with Response.NoSpec when
// the version is unknown) and applies the ones that pass in order, in a
// single compare-and-set update retried on conflict, so concurrent
// appliers (agent services, dispatcher replicas) never lose an update.
// Each intent is applied exactly once: its key "<call_id>/<intent_id>" is
// remembered in the session (the most recent ApplierConfig.Remember keys),
// so a response delivered twice — at-least-once delivery, a retried RPC —
// applies nothing the second time. A refused intent changes nothing but
// the log, and takes no key in the remembered list: the refusals of one
// response are one log entry (Summary: intent_id RefusedEntryID, how many
// and the first four reasons in at most 2 KiB, and a payload
// {"count":N,"sha256":...} digesting the refused intents; never their
// payloads), recorded once while the log holds it, so that no number of
// refused intents pushes applied keys out of memory or fills the log.
// Every Apply returns the refusals (Outcome.Refused; Refusal.Entry is one
// as the API answers it, without its payload), and Outcome.Recorded counts
// the ones it recorded. The log is bounded by entries
// (ApplierConfig.MaxLog) and by its encoded size (MaxLogBytes), the
// remembered keys by number (ApplierConfig.Remember) and bytes
// (MaxAppliedBytes), the state by MaxStateBytes: a session stays one KV
// value under the server's payload limit. SET_STATE with a null value
// deletes the key;
// END_SESSION marks the session ended (the first one stands: a later one
// is logged but keeps the first reason); SET_MODE sets Session.mode, and
// only when the one applying holds the authority to set modes
// (Response.SetsMode: the admin scope; otherwise it is refused) (an
// empty mode clears it; the payload's mode is a name, ^[A-Za-z][A-Za-z0-9_-]{0,63}$,
// and whether the policy declares it is admission's to check: a session in
// a mode the policy in force does not declare is refused MODE_RESTRICTED
// by the dispatcher); the suppress flags default to true;
// EMIT_EVENT, NOTIFY, INJECT_CONTEXT and custom intents change no field and
// are recorded, like every applied intent, in the session's log (the most
// recent ApplierConfig.MaxLog).
//
// # Listing
//
// List reads one page of a tenant's sessions: an ordered consumer on the
// bucket's stream, filtered by the tenant's key prefix ("<tenant>.>",
// SessionKey), from the page token's stream sequence on. The bucket keeps
// one record per key, so the stream holds each session once, at its last
// update: the order is that of the last update, oldest first (newest
// first would need every key of the tenant before the first page). It
// stops at the page (DefaultPageSize, at most MaxPageSize) or after
// MaxScanned records, reading 256 at a time, so no listing holds a
// tenant's every session; the next page token is the sequence after the
// last record read. Filters (state, mode) are applied to the records
// read, so a page may be short and still have a next one. A session
// updated between pages moves to the end and shows again. Listed sessions
// carry no log, state values or applied keys.
// # Pinned versions
//
// A session's record also holds the spec versions the session pins, by
// tool name (Session.pinned_versions: versions locked per session, which
// the dispatcher writes at admission; internal/dispatch's doc.go says
// when). They are not intents: no tool's result can set them. Pin writes
// one by the same compare-and-set as Apply (modify: load, change, Update
// at the read revision, retried on conflict up to
// ApplierConfig.MaxAttempts), and only when the session pins nothing for
// the tool yet: the first pin stands, and Pin returns the version in
// force, so racing writers agree. A session pins at most MaxPins (256)
// tools (ErrTooManyPins): some 25 KiB of the record. ClearPins removes
// one tool's pin, or all. Both bump the revision and are not logged.
//
// Orchestrators that keep their own state use pkg/client's Applier
// interface instead.
package intents
