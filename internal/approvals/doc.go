// Package approvals keeps the durable state of the approval flow (DESIGN
// §6) in the approvals bucket (bus.Bus.Approvals, a KV bucket with
// per-key TTLs): the calls an ask decision parked and what became of
// them, the nonces approvals used, and the standing grants. Every
// dispatcher replica runs the flow over it (internal/approvalflow); the
// worker reads it, by key only, to re-check a call before executing it
// (CheckCall). The policy engine (internal/policy) decides and checks
// bindings; this package stores and reads them.
//
// # Keys
//
// The tenant is always the second token of a key, so a tenant's records
// are one subject filter and no key of one tenant names another's:
//
//	call.<tenant>.<call id>     an approval (Record, JSON): the parked call, its state,
//	                            its binding once approved; the approval id is the call id
//	nonce.<tenant>.<nonce>      a used nonce; the value is the call id that used it
//	grant.<tenant>.<grant id>   a grant (Grant, JSON)
//
// Call and grant ids are ULIDs (ValidID), nonces 32 hex digits; anything
// else is refused before it becomes part of a key.
//
// # Records
//
// A Record holds the toolwirev1.Approval that approvers, events and the
// audit see (the arguments redacted by the tool's secret fields), the
// parked ToolCall exactly as it is to be published (its arguments byte
// for byte; never an approval token), the call's schedule-to-start and
// schedule-to-close timeouts (stamped as deadlines when it is approved:
// the time a person takes does not count against them), the nonce, and,
// once approved, the binding (policy.Approval: tenant, agent, session,
// tool, spec version, the SHA-256 of the canonical arguments, expiry,
// approver, nonce). Its states: PENDING → APPROVED, DENIED or EXPIRED,
// each change a compare-and-set on the revision it was read at (Update),
// so of replicas racing to decide one record exactly one wins.
// Published says the decision is finished: the approved call is on the
// calls stream, or the denied or expired call's terminal answer is on the
// results stream. The stored form is JSON with the two messages in binary
// protobuf and a format version; a record of another version is refused
// (ErrCorrupt).
//
// Every write of a record also carries its summary in headers
// (Toolwire-Approval-State, -Tool, -Agent, -Session, -Expires, -Decided,
// -Published), so listings and the sweep read summaries with a
// headers-only consumer and never load a record's body to filter it.
// Writes are plain JetStream publishes to the bucket's subjects with
// Nats-Expected-Last-Subject-Sequence (the compare-and-set; 0 = create)
// and Nats-TTL, which the KV API cannot combine on an update.
//
// # Lifetimes
//
// A pending record lives until its expiry plus the retention (the sweep
// expires it first); a decided record and a used nonce the retention
// after the decision (Store's retain: the dispatcher's ApprovalRetention,
// by default the calls' audit horizon, bus.Config.CallsMaxAge); a nonce
// at least as long as the approval that carries it. A grant lives until
// its expiry (plus a minute; Covers checks the expiry itself), or for
// good without one, until revoked: a revocation is a purge whose marker
// lives an hour, so every replica's watch sees it. The bucket is bounded
// (bus.Config.ApprovalsMaxBytes, 96 MiB); when it is full a write is
// refused, and the dispatcher refuses the asked call rather than queue it
// (fail closed). Long retentions and large arguments need a larger bucket.
//
// # Single use
//
// An approval lets one call run once: deciding is one compare-and-set of
// its record, and the approval that publishes the call first consumes the
// record's nonce with a KV create naming the call (ConsumeNonce: the same
// call may mark it again, any other call gets ErrNonceUsed). The token
// form uses the same nonce: a token redeems the record it was issued
// with, so a token and an approver cannot both run the call.
//
// # The worker's re-check
//
// CheckCall runs before a worker executes a call that names an approval
// (approval_id) or a grant (grant_id), or whose tool requires approval.
// It refuses (RefusedError, matched by ErrRefused; the worker answers
// CONFIRMATION_REQUIRED and dead-letters the call) a call whose approval
// is not its own (the approval id is the call id), whose record is
// missing, not APPROVED, bound to another caller, tool, spec version or
// arguments, or expired (policy.Approval.CheckCall), or whose nonce was
// not consumed by this call id; a call whose grant is missing (revoked,
// expired) or does not cover it (policy.Grant.Covers); and a call of a
// tool that requires approval that names neither. A bucket that cannot
// be read is another error: the call is handed back, never run on a
// guess. Every read (the worker's and the dispatcher's: Get, GetGrant,
// ConsumeNonce's look at who used a nonce, RevokeGrant) goes to the
// bucket's leader (bus.KVGetFromLeader): on a replicated bucket a direct
// get may be answered by a replica that has not stored the latest write,
// and a worker would have refused a call approved a moment before as
// "pending" or "never consumed" (and dead-lettered it), or a revoke would
// have found no grant to revoke. Worker credentials allow that get and
// nothing else on the bucket. Redeliveries and retries of an approved call pass (same call
// id); a dead letter retried as a new call does not (a new id: approvals
// are once). The binding expires with the call's schedule-to-close
// deadline, or, without one, the dispatcher's ApprovalTTL after the
// approval: a retry after that is refused. The worker reads the policy
// only for a call that names an approval or a grant, and only to refuse
// what it now denies (internal/worker, "The policy check"), so an ask that
// came from a policy rule (not from requires_approval) is not re-checked
// for a call that names nothing; worker credentials cannot publish calls.
//
// # Listing
//
// List reads the summaries of one tenant's records (a headers-only
// ordered consumer, last write per key), keeps the limit+1 newest that
// match the filter (state, tool glob, agent, session) in a heap, then
// reads those records: newest first (ids are ULIDs), at most MaxListLimit
// (1000), memory bounded by the limit whatever the number of records.
//
// # Tracker and grant index
//
// Every dispatcher replica runs a Tracker (a headers-only ordered
// consumer over every record write, from the last write of each key on)
// that keeps only the summaries of records that still need something
// done: pending ones (they expire) and decided ones not published. The
// dispatcher's sweep asks it what is due (Due) and acts with a
// compare-and-set, so the replicas' sweeps never decide twice. The
// replica that writes a record tells its tracker at once (Note).
//
// Every replica also runs a GrantIndex: a KV watch of the grant keys into
// memory, loaded before Start returns, which is the policy.GrantSource
// admission decides with (the grants of the caller's tenant; Decide
// checks each). A grant stored or revoked on one replica is in force on
// every replica when its watch delivers the write (one stream message:
// milliseconds on a healthy cluster); the replica that writes it updates
// its own index at once (Add, Remove). Stop ends the watch also on a
// connection already closed (a killed dispatcher's): the watch has a
// context of its own, which Stop cancels — nats.go ends the watch's
// subscription goroutine only with it when an unsubscribe cannot reach
// the server.
//
// # Tokens
//
// Keys are the dispatchers' token keys, read from a file (LoadKeys) of
// "id:base64key" lines: the first key signs, every key verifies. A
// rotation is done in rolling steps so that every replica always
// verifies what any replica signs: add the new key second and roll out;
// move it first and roll out; once the tokens signed with the old key
// have expired (ApprovalTTL), remove it and roll out. The file must not be
// readable by group or others, is at most 64 KiB, and each key has at
// least 32 bytes; errors name the line, never a key, and Keys.String
// names ids only.
//
// A token is "tw1.<key id>.<payload>.<mac>": the payload the binding as
// JSON in base64url (approval id, tenant, agent, session, tool, spec
// version, the arguments' SHA-256, expiry, nonce), the MAC HMAC-SHA256
// (standard library) over a domain string, the key id and the payload.
// Verify checks the MAC in constant time (hmac.Equal), with strict
// base64 so a token has exactly one spelling, and refuses unknown keys,
// unknown payload fields and anything over 4 KiB before doing more. The
// payload is readable by its holder: it says nothing the caller does not
// know; the MAC makes it unforgeable. What the token binds is checked
// against the call by policy.Approval.Check (in Decide); that it is used
// once, by the record's compare-and-set and the nonce.
//
// # Decisions
//
// Where the issue was silent:
//
//   - Records are JSON, not a new protobuf message: the contract stays as
//     it is, and the stored form carries its own version.
//   - A token's approval is the parked call's: presenting it approves that
//     record, and the call runs under the parked call's id. A token and an
//     approver therefore race for one record, never for two executions.
//   - Grants carry a per-key TTL a minute past their expiry, so the
//     bucket does not keep expired grants; a grant without expiry is
//     kept until revoked.
//   - The tracker and the grant index hold no record bodies: memory grows
//     with the pending and unpublished records and with the grants, not
//     with the retained history.
package approvals
