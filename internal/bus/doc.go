// Package bus is the one place that knows toolwire's JetStream layout: it
// starts the embedded server, connects to an external one, and creates and
// checks every stream, consumer and bucket, idempotently, from Config.
//
// # Layout
//
// With the default prefix "toolwire":
//
//	stream TOOLWIRE_CALLS    toolwire.call.<type>.<tenant>.<provider>.<tool>   limits retention (the audit log)
//	                         toolwire.shadow.<type>.<tenant>.<provider>.<tool> replays, for shadow pools only
//	stream TOOLWIRE_RESULTS  toolwire.result.<tenant>.<dispatcher>.<call_id>   one terminal result per subject
//	stream TOOLWIRE_EVENTS   toolwire.event.<tenant>.<dispatcher>.<call_id>    lifecycle and progress, short retention
//	stream TOOLWIRE_DLQ        toolwire.dlq.<type>.<tenant>.<provider>.<tool>  dead letters
//	stream TOOLWIRE_RETRIES    toolwire.retry.{sched,due}.<call_id>.<attempt> long retry delays as message schedules
//	stream TOOLWIRE_ADVISORIES $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.TOOLWIRE_CALLS.*
//	KV     toolwire_cancels     <tenant>.<call_id>                              cancel tombstones with per-key TTL
//	KV     toolwire_idempotency sha256(tenant, key)                             idempotency keys for the audit horizon
//	KV     toolwire_registry    <tool> and versions.<tool>.<version>            ToolSpec values
//	KV     toolwire_sessions    <tenant>.<session>                              session states of the reference intent applier
//	Object toolwire_blobs                                                       outputs over the inline limit
//
// Subject tokens from user input pass through Token, so `.`, `*`, `>` and
// white space never reach a subject.
//
// # Decisions
//
//   - CALLS uses limits retention, never work-queue: acknowledged calls stay
//     for the audit until CallsMaxAge. Its size is bounded by CallsMaxBytes
//     with discard-new, so a full stream rejects new calls explicitly
//     (OVERLOADED) instead of silently dropping old, unexecuted ones.
//   - The duplicate window (DuplicateWindow, default 10m) is at least the
//     dispatcher's retry horizon; Nats-Msg-Id is the call id or the
//     tenant-scoped idempotency key.
//   - Pool consumers are durable pull consumers created with
//     DeliverNewPolicy (DeliverAll on a limits stream would re-run history;
//     the policy cannot change later) and explicit acks, filtering exactly
//     the tools the pool serves (ToolSubject). Workers create them before
//     registering their tools, so no call is admitted before a consumer for
//     it exists. Overlapping pools are refused (ErrPoolOverlap): on a
//     limits stream both would run every call.
//   - MaxDeliver advisories are captured in a stream, since they are core
//     messages lost when nobody listens; the dispatchers' reaper ends the
//     calls they name.
//   - The embedded server never installs signal handlers (NoSigs), always
//     has an explicit store directory and limits, and syncs to disk every
//     SyncInterval (default 1s, not the server's 2m: a longer interval can
//     lose acknowledged writes on power loss). SyncAlways trades throughput
//     for no loss window at all.
//   - EncryptionKey encrypts the embedded server's store at rest
//     (nats-server's JetStreamKey; ChaCha20-Poly1305 or AES-GCM): the calls
//     stream stores arguments, secret ones included, in clear otherwise. A
//     key shorter than MinEncryptionKeyBytes is refused, errors never show
//     it, and a store written in clear is encrypted when the server first
//     starts with a key. A lost key makes the store unreadable.
package bus
