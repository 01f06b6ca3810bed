// Package dispatch is the dispatcher core: it establishes who is calling,
// admits a call, publishes it on the calls stream and hands the terminal
// response back to the caller waiting for it. Dispatcher is the core;
// Service serves it as toolwire.v1.DispatcherService over Connect; Run and
// Main make the dispatcher process (cmd/dispatcher). Several replicas can
// run side by side: any of them answers GetResult, Cancel and Watch for any
// call.
//
// # Identity
//
// Identity (tenant, agent, scopes) comes from credentials only, never from
// a request body. An Authenticator turns an HTTP request into an Identity;
// Authenticate wraps the API handler with it and answers a Connect
// `unauthenticated` error (HTTP 401) when it fails or yields a tenant that
// does not match TenantRe (tenants become subject tokens and KV keys).
// OpenAccess, the default without an API key file, makes every request
// DefaultIdentity (tenant default, agent local, scopes *); Run logs a
// warning when its listener is not loopback. APIKeys checks
// `Authorization: Bearer <key>` in constant time against the SHA-256
// hashes of an APIKeyFile, so the file holds no usable secret. A call's
// Caller is the identity plus the session, user, run and turn the request
// names.
//
// # Admission
//
// Submit and Call give the call a fresh ULID and admit it, in order: a
// tool name is present → the tool is in the registry (its current version,
// or the spec_version the request pins) → it is not disabled → the caller
// holds all of its scopes → the arguments are within the size and nesting
// limits (the tool spec's, else Config.MaxArgsBytes, 256 KiB, and
// MaxArgsDepth, 32) → they are valid against the tool's input JSON Schema.
// The arguments are the request's arguments_json byte for byte when given,
// else its arguments object encoded as JSON, else {}. A refusal is
// answered at once as a ToolResponse (source "dispatcher") with VALIDATION
// (each offending field named by a JSON Pointer in violations), NOT_FOUND
// (unknown or disabled tool) or PERMISSION_DENIED, not retryable, with
// partial_side_effects NONE (a failed registry read answers INTERNAL);
// nothing is published. The admitted ToolCall pins the spec version and
// carries as deadlines the tighter of the tool's and the request's
// schedule-to-start and schedule-to-close timeouts.
//
// A replica with Config.MaxWaiting (100,000) callers already waiting in
// Call answers a new Call OVERLOADED (retryable, retry_after 1s) without
// publishing it; the refusal is recorded as a REJECTED event like every
// other, so any replica answers the call id with it.
//
// # Idempotency keys
//
// A call with an idempotency key first claims the key (the hex SHA-256 of
// tenant and key) in the idempotency bucket, binding it to the call id,
// the tool and the SHA-256 of the arguments for the bucket's TTL (the
// audit horizon), not just the calls stream's duplicate window. When the
// key is already bound, the same tool and arguments answer the original
// call id (Submitted.Duplicate; Call then waits for that call as GetResult
// does); anything else answers CONFLICT. A call the calls stream does not
// take releases its key.
//
// # Publishing
//
// The call (binary protobuf) is published asynchronously on
// toolwire.call.<type>.<tenant>.<provider>.<tool> with the Nats-Msg-Id and
// Nats-Expected-Stream headers (the call id and the calls stream), set
// directly rather than through jetstream's publish options. Only the
// call's acknowledgement is awaited. A publish left unanswered (timeout,
// reconnect) is sent again under the same message id, backing off from
// 50ms to 1s, for up to 10s: the duplicate window stores it at most once.
// A publish the server refuses (e.g. the calls stream is full), one that
// cannot be sent, or one still unanswered after 10s is answered OVERLOADED
// (retryable, retry_after 1s) and recorded as a REJECTED event. When the
// caller's context ends while the acknowledgement is awaited the call may
// be stored, so its key and admission record are kept.
//
// # Records of admission, rejection and cancellation
//
// An ACCEPTED event in the events stream is how any replica tells a
// pending call from an unknown id. It is a core publish that the stream
// captures, sent right after the call on the same connection (so it is
// stored after the call) and not acknowledged: a second acknowledgement
// per call cost a quarter of the throughput. Submit sends it at once. For
// a call waited on with Call it is queued (package lazy) and sent only if
// the call outlives Config.AcceptedRecordDelay (default 50ms; -1 = at
// once), or when the wait ends without a result: a fast call's result is
// its record. A call id minted less than 10s ago without any record is
// therefore treated as possibly pending, and GetResult with a wait waits
// for any id without a record (its record may have been lost in a server
// outage).
//
// Rejections and cancel requests are different: they are recorded with an
// acknowledged JetStream publish (at most 2s) before the caller gets its
// answer, so any replica answers them once the caller has. A record that
// cannot be written is logged, not reported to the caller.
//
// # Results
//
// Start opens one core subscription per replica,
// toolwire.result.*.<Config.Name>.* (a JetStream publish reaches core
// subscribers too), and a map of waiting callers by call id. The
// subscription's goroutine only routes the bytes; each waiter decodes its
// own result. Call waits up to the request's wait (0 = Config.DefaultWait,
// 60s; at most Config.MaxWait, 15m); when the wait passes first it answers
// PENDING with the call id and the call keeps running. Config.Name (default
// the host name plus a random suffix) must be unique among live replicas;
// results survive a name change, since they are found by call id.
//
// GetResult answers from any replica, including one started after the call
// was submitted: a direct get of the last message on
// toolwire.result.<tenant>.*.<call_id>; without one, a REJECTED event
// answers the rejection, an id without any record (and not minted in the
// last 10s) is UNKNOWN, and anything else is PENDING. With a wait it
// subscribes to the result before looking, so none is missed, looks at the
// stream again every 250ms, and waits up to the wait (at most MaxWait). An
// id that is not a ULID is UNKNOWN.
//
// # Cancel and Watch
//
// Cancel writes the call's tombstone, <tenant>.<call_id> in the cancels
// bucket with who cancelled (the caller's agent) and why, living
// bus.Config.CancelTTL (24h); workers check it before starting a call and
// watch it while it runs. It answers ALREADY_FINISHED when the call has a
// result or was rejected, UNKNOWN_CALL for an id that is not a ULID or has
// no record (and was not minted in the last 10s), and REQUESTED otherwise,
// recording a CANCEL_REQUESTED event; a second cancel finds the tombstone,
// answers REQUESTED and records nothing.
//
// Watch subscribes to the call's result, then replays the call's stored
// events from admission on, whichever replica admitted it, and ends with a
// FINISHED event carrying the terminal response once the stored events are
// sent; a REJECTED event ends it too. An unknown id is ErrUnknownCall.
//
// # Reaper and retry mover
//
// Start also consumes two durable consumers that every replica shares, so
// each message is handled once. The reaper reads the server's MaxDeliver
// advisories captured in the advisories stream: a call whose every
// delivery crashed or stalled and that has no result gets a dead letter
// (message id reap-<stream sequence>, so a retry does not duplicate it)
// and a terminal MAX_ATTEMPTS response (source "dlq", side effects
// UNKNOWN) published with ExpectLastSequencePerSubject(0), so it never
// replaces a result; no caller waits forever. The mover reads due retries
// from the retries stream (calls a worker parked there for a long retry
// delay) and puts each back on its calls subject with the message id
// <call_id>-r<attempt> and the trace context the worker wrote. It first
// checks that the due retry retries a stored call: the schedule names the
// calls stream sequence of the delivery it retries (bus.RetryOfHeader),
// and the call stored there must equal it in every field but the attempt.
// Anything else is dropped with an error log: worker credentials may write
// retry schedules, and a schedule must not queue a call admission never
// saw. Both retry a failed message after 1s.
//
// # Dead-letter retries
//
// Start also serves `toolctl dlq retry` (dlq.ServeRetries, one queue group
// of every replica): an operator's NATS credentials may not publish calls,
// so the operator asks a dispatcher, which republishes the dead call as a
// new call (see internal/dlq).
//
// # Intents
//
// Call with apply_intents (which needs a session) applies the response's
// intents with the reference applier (internal/intents) to the call's
// session; when that fails the response is still answered, with the reason
// in apply_error. ApplyIntents applies a finished call's intents later
// (each intent once); GetSession reads a session's state.
//
// # The API server
//
// Service.Handler serves DispatcherService (Connect, gRPC, gRPC-Web, JSON)
// behind Authenticate and compresses only responses of 1 KiB or more.
// ListTools shows only the tools whose scopes the caller holds all of;
// GetTool answers NotFound for the others; ApproveTool needs the "admin"
// scope. Run serves it with /healthz, /readyz (registry loaded, NATS
// connected, streams present) and /metrics on one listener (default
// 127.0.0.1:8080) speaking HTTP/1.1 and unencrypted HTTP/2 (h2c), with a
// 10s ReadHeaderTimeout and no other server timeout, so long waits and
// watches are not cut off. With tracing on, a caller's traceparent parents
// the admission span, and the call's trace context travels to the worker
// in the message headers.
//
// Run uses the embedded NATS server (store under <DataDir>/jetstream) unless
// NATSURL names an external cluster. The embedded server's client listener
// (NATSListen) always requires credentials: on its first start with one,
// Run makes an nkey per role (bus.RoleWorker, bus.RoleOperator) under
// <DataDir>/credentials (directory 0700, files 0600; bus.EnsureCredentials)
// and reuses them on later starts; it logs the files' paths, never their
// content, and warns when the listener is not on loopback (NATS traffic is
// not encrypted). The dispatcher and its in-process workers connect in
// process with every permission. Run starts in-process worker pools
// (default every type with the embedded server, none with an external one)
// from WorkerConfig or, without one, the built-in examples of
// internal/workerconfig. It stops in order: HTTP, the in-process workers
// (in-flight calls finish within Grace, 25s), waiting callers (released
// with ErrStopped; they fetch their results later by id), the registry
// watcher, the NATS connection (drained), the embedded server. Main parses
// the flags (each also TOOLWIRE_<NAME>, see internal/cliflag) and exits 0
// after a clean stop, 1 on a runtime error and 2 on bad flags.
package dispatch
