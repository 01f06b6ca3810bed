// Package dispatch is the dispatcher core: it admits a call, publishes it
// on the calls stream and hands the terminal response back to the caller
// waiting for it; it answers GetResult, GetOutput, Watch and Cancel for
// any call, and keeps the reference applier's sessions. Dispatcher is the
// core. Its faces serve it, each taking it as a small interface of the
// calls it makes: internal/api (toolwire.v1.DispatcherService over
// Connect), internal/mcpserver (/mcp) and internal/dashboard (/ui). The
// dispatcher process that runs it (flags, embedded NATS server, HTTP
// server, in-process workers) is internal/dispatchd, which cmd/dispatcher
// runs; this package imports no worker, worker configuration or executor
// package (internal/houserules holds it to that). Several replicas can
// run side by side: any of them answers GetResult, Cancel and Watch for
// any call.
//
// What the core runs but does not hold lives in packages that never
// import it (one that needs the core takes a small interface of it): the
// hooks (internal/hooks), the approval flow (internal/approvalflow), the
// limits (internal/limitgate), the policy operations (internal/policyops),
// the cached views of the pools (internal/poolview) and the background
// maintenance (internal/maintenance). The answers the dispatcher gives
// itself (rejections, OVERLOADED) are built by internal/envelope, and
// arguments are checked by registry.CheckArgs, the check the worker
// repeats.
//
// # Identity
//
// Who is calling is internal/identity's, from credentials only. The
// Dispatcher's methods that act for a caller take its identity.Identity
// and refuse one whose tenant cannot be a subject token
// (identity.CheckTenant, identity.ErrBadTenant) before anything is
// recorded.
//
// A caller reaches the calls of its own tenant only: every record is read
// on the tenant's subjects and keys. Within the tenant, Config.
// AgentVisibility decides (identity.Identity.MaySeeCall, the rule every
// face applies): under identity.VisibilityOwn, GetResult (and GetOutput
// and ApplyIntents through it), Watch and Cancel first look up the agent
// that made the call (reach.go: this replica's memory of the calls it
// published, the stored call or its approval record, or, for a call not
// stored, the newest of its events that name its caller — ACCEPTED,
// REJECTED and the approval's, never a CANCEL_REQUESTED, which names the
// canceller — records only dispatchers write) and answer a call of
// another agent exactly as a made-up id (UNKNOWN, ErrUnknownCall,
// CANCEL_OUTCOME_UNKNOWN_CALL); so do CallArguments (ErrCallNotStored)
// and a call that continues another agent's (admit_input.go: "no finished
// call"), and GetSession's log keeps only the entries of calls the caller
// may see (a session itself is the tenant's: named by its callers, its
// state is what every agent naming it made it). An idempotency key is
// then the agent's ("Idempotency keys"). Keys with the admin or approve
// scope, and the default identity.VisibilityTenant, need no look-up, and
// under VisibilityTenant admission remembers no call's agent.
//
// # Admission
//
// Admission is a per-call value and an ordered list of steps
// (admission.go): Submit and Call give the call a fresh ULID and an
// admission value that holds what every step needs (the identity, the
// request, the entry and spec, the arguments parsed once, the call being
// built, the decision, the ask or token, the waiter, the idempotency
// claim, the limits ticket); each step, one file named admit_<step>.go,
// fills it in and returns a verdict (next, refuse, park, redeem, done)
// that one settle carries out. The steps, in the order of admissionSteps:
//
//  1. session (admit_session.go): a call naming a session that
//     END_SESSION ended is refused SESSION_INACTIVE, the session's state
//     read from the session view (internal/sessionview: cached, kept
//     current by a watch of the sessions bucket on every replica, read
//     from the bucket on a miss; a read that fails is an error); the
//     session rules of the policy in force apply (required, opened_only,
//     default_mode). A session name is at most MaxSessionBytes (256) of
//     UTF-8 (VALIDATION): it is stored in the record and cached. It is
//     first because lookup runs the version the session pins. See
//     "Sessions".
//  2. lookup (admit_lookup.go): a tool name is present, the tool is in
//     the registry (its current version, the spec_version the request
//     names, or the version the call's session pins: see "Versions locked
//     per session") and it is not disabled (NOT_FOUND, suggesting the
//     tools the caller may have meant; a failed registry read answers
//     INTERNAL).
//  3. scopes (admit_scopes.go): the caller holds all of the tool's scopes
//     (PERMISSION_DENIED); then toolset (admit_toolset.go): a request
//     that names a model (CallRequest.model; at most 128 bytes of
//     policy.ModelNameRE, else VALIDATION) gets its family from the
//     policy in force (policy.Policy.ModelFamily), carried in the call's
//     Caller as model and model_family, and a tool the family's toolset
//     hides or substitutes is refused PERMISSION_DENIED naming the
//     toolset (recorded with rule "toolsets.<family>"; docs/toolsets.md);
//     then definition (admit_toolset.go): the definition of the version
//     lookup resolved for the request's model family and the session's
//     mode (registry.Definition, the first that matches; docs/toolsets.md,
//     "Definitions in the spec") is found, and a tool it hides is refused
//     PERMISSION_DENIED naming it — before the pin step writes anything
//     (a hook's own call is exempt, as from the session step).
//  4. pool (admit_pool.go): a worker pool consumes its calls (see "Pool
//     check"); then pin (admit_pin.go): with pinning in force and no pin
//     yet for the tool, the version resolved is pinned into the
//     session's record (a version another call pinned first is looked
//     up, and its scopes and definition checked, again).
//  5. arguments (admit_arguments.go): the arguments are within the size
//     and nesting limits (the tool spec's, else Config.MaxArgsBytes, 256
//     KiB, and MaxArgsDepth, 32), have at most Config.MaxArgsValues (2048)
//     object members and array elements, counted by a scan that allocates
//     nothing, and are valid against the tool's input JSON Schema (a
//     schema refusal lists at most 20 violations; its message ends "and N
//     more" when there were others, so a rejection, answered and stored as
//     an event, does not grow with the arguments). Then variant
//     (admit_toolset.go): arguments must satisfy the input schema of the
//     spec's definition the call is offered, and the schema variant the
//     model's family's toolset offers, too (VALIDATION naming the
//     definition or the toolset); a before-hook's rewrite is held to the
//     tool's schema only.
//  6. input (admit_input.go): a call that answers a tool's request for
//     input (CallRequest.continues) continues a stored input-required
//     response of the caller's tenant, the same tool at the same spec
//     version and the same arguments (their canonical form's SHA-256), at
//     most Config.InputTTL old (VALIDATION naming the field "continues"
//     otherwise).
//  7. call (admit_call.go): the ToolCall as it will be published; it pins
//     the spec version and carries as deadlines the tighter of the tool's
//     and the request's schedule-to-start and schedule-to-close timeouts.
//  8. delegation (admit_delegation.go): a call that names the call on
//     whose behalf it is made (parent_call_id) is checked against its
//     parent and carries its chain (see "Delegation chains").
//  9. after-hooks (admit_afterhooks.go): the after-hooks the policy in
//     force binds to the tool are named in the call (see "Hooks").
//  10. before-hooks (admit_beforehooks.go): the before-hooks run; one may
//     refuse the call, ask, or rewrite its arguments (see "Hooks").
//  11. policy (admit_policy.go): the policy in force decides (see
//     "Policy"); a deny answers PERMISSION_DENIED; an ask (a rule,
//     requires_approval, a default, or a before-hook's) that no grant and
//     no valid approval token covers is left for the approval step.
//  12. loop guard (admit_loopguard.go): see "Loop guard".
//  13. waiter (admit_waiter.go): a caller waiting in Call gets its place
//     among the replica's waiters before anything is published (a fast
//     call's result may arrive before the publish returns). A replica
//     with Config.MaxWaiting (100,000) callers already waiting answers a
//     new Call OVERLOADED (retryable, retry_after 1s) without publishing
//     it; the refusal is recorded as a REJECTED event like every other,
//     so any replica answers the call id with it.
//  14. idempotency (admit_idempotency.go): see "Idempotency keys".
//  15. approval (admit_approval.go): an asked call is parked, a call an
//     approval token covers redeems the parked one (see "Approvals").
//  16. overload (admit_overload.go): see "Overload".
//  17. limits (admit_limits.go): see "Limits and budgets"; last that can
//     refuse before the publish, so that a call refused by any other step
//     spends nothing.
//  18. latency (admit_latency.go): the call's soft latency budget is
//     resolved and the call watched; it never refuses (see "Latency
//     budgets").
//  19. publish (admit_publish.go): see "Publishing".
//
// The arguments are the request's arguments_json byte for byte when given,
// else its arguments object encoded as JSON, else {}; a request that sets
// both is refused (VALIDATION), since the caller could not tell which one
// ran. An object that repeats a key anywhere in the arguments is refused
// (VALIDATION, the violation's field the repeated member's JSON Pointer,
// the message naming the key): with "last wins" the schema and the tool
// could read different values. A refusal is answered at once as a
// ToolResponse (source "dispatcher") with VALIDATION (each offending field
// named by a JSON Pointer in violations), NOT_FOUND (unknown or disabled
// tool, or no pool consumes its calls), SESSION_INACTIVE,
// PERMISSION_DENIED, CONFIRMATION_REQUIRED, CONFLICT, OVERLOADED, RATE_LIMIT or
// BUDGET_EXCEEDED (a failed before-hook: TRANSIENT), with
// partial_side_effects NONE, retryable only for OVERLOADED, RATE_LIMIT,
// BUDGET_EXCEEDED and TRANSIENT; nothing is published.
// Every refusal is carried out in one place (admission.refuseCall): the
// caller's waiter released, the refusal recorded as a REJECTED event with
// the decision that refused it (but an overload refusal of a call without
// an idempotency key: see internal/poolview's doc.go, "Overload"), then
// the idempotency key released; the log names the step that stopped the
// call. The REJECTED event records the names the caller chose (tool,
// agent, session, user, run, turn) cut to 128 bytes and the refusal's
// message to 1 KiB (events.go:recordRejection): a refused request's names
// are unchecked (an unknown tool, an over-long session), and every
// refusal is stored and indexed (internal/callindex).
//
// A refusal quotes no secret: the values of the arguments the tool's input
// schema marks secret ("x-toolwire-secret": true) are replaced by
// "[REDACTED]" in its message and violations (a JSON Schema `pattern` or
// `enum` error quotes the value) before it is answered, recorded as a
// REJECTED event or set on the admission span (redact.go; internal/redact,
// which also says why values under 4 bytes are replaced only where
// quoted).
//
// # Pool check
//
// The pool step (admit_pool.go) refuses NOT_FOUND a call no pool consumer
// takes, against internal/poolview's Pools: see its doc.go, "Pool check".
//
// # Overload
//
// The overload step (admit_overload.go) refuses OVERLOADED against
// internal/poolview's Load: see its doc.go, "Overload".
//
// With an archive store (Config.Archive) it refuses first every new call
// while the archive is so far behind that a stream would drop what it has
// not archived (archivelag.go). Every 2s it reads, for each archived
// stream, its oldest unarchived message — the first after the sequence
// the active archiver recorded (archive.ReadProgress), read from the
// stream, so an archiver that stopped shows a lag that grows — and the
// stream's live MaxAge (a hold the archiver placed included). It refuses
// while a stream's lag is within a margin of that MaxAge: a quarter of
// the archiver's HoldAhead (archiveLagMargin: 1.5h by default, a
// sixteenth of the shortest window under 24h). An archiver that holds
// keeps the oldest unarchived message HoldAhead/2 or more inside the
// MaxAge, so a working hold — over an archive store that is down, or a
// backlog being archived — is never refused (the streams then grow past
// the window, within their byte limits: internal/archive, "Age is not
// the only limit"); a hold no archiver renews, or no hold at all, is. A
// stream that still keeps, unmarked, a MaxAge longer than its window —
// the one it had before the archive was turned on or the window
// shortened — is not measured: it drops what it dropped before, until
// the archiver holds or lowers it (its first pass, when the oldest
// message is past the window). The same refusal stands while a measured
// stream that drops its oldest messages at its byte limit (results,
// events) holds StoreHighWater of the limit or more with its oldest
// message not archived: its next writes would drop what no archive
// holds, however young. OVERLOADED, retry_after 30s, cause
// "archive_behind" and the stream as target; a keyed call is refused
// before its key is claimed (writing nothing); logged at WARN once a
// minute with the count refused. The lag is exported as
// toolwire_archive_lag_seconds{stream} (0 when caught up). A stream
// whose lag cannot be read three times in a row (archiveLagUnknownAfter)
// has an unknown lag, logged at ERROR: not exported, and not refused on
// (fail-open; a stale value would refuse every call on a passing read
// error) until it is read again.
//
// # Paused pools
//
// An installation admin (the "admin" and "installation" scopes: a pool
// serves every tenant) pauses a pool with PausePool and resumes it with
// ResumePool (poolpause.go; the dashboard's pools page). The pause is
// the server's, on the pool's consumer (bus.PausePool: it delivers
// nothing to any worker of any replica until resumed, and outlives every
// process), recorded with it — who (tenant/agent of the key), when, why —
// in the consumer's metadata, and logged at info ("pool paused", "pool
// resumed"). Every replica reads it with the pools' load (poolview, every
// LoadConfig.Refresh); the replica that paused reads again at once.
//
// Decision: a call to a paused pool is refused at admission, OVERLOADED,
// retryable, retry_after 30s, message "pool P is paused by an
// administrator: it takes no new calls until it is resumed", cause
// "paused" in toolwire_dispatcher_overload_refusals_total. Callers are
// agents waiting on answers and every pool bounds the wait in its queue:
// a call queued behind a pause of unknown length would only expire, so it
// is refused promptly, with an answer a caller already knows how to
// retry. (No new error type: OVERLOADED means "not now, nothing ran,
// retry later".) Calls queued before the pause stay queued: they run
// after the resume, or expire on their own deadlines and are answered as
// usual. Calls already running finish. A pause made outside toolwire (the
// NATS API with the operator credential) refuses the same way, named so
// ("paused outside toolwire"), and is shown as a hand edit (poolview
// Pause.Drift); the pool's workers put it back (resume it: no one
// recorded it), as they put back any other hand edit of a pool consumer
// (internal/worker, "Pool consumers put back"). A pause or resume is
// answered done only once the consumer, read back, holds both its record
// and its pause as asked (bus.PausePool: an EnsurePool at the same moment
// can undo it; it is done again, up to three times, then refused with
// bus.ErrPauseOverlapped). The pool's name is checked (bus.ValidPoolName)
// right after the scope, before it reaches a NATS subject, and a name
// that fails is ErrNoPool, not echoed: a name past the server's control
// line limit would make the server close the dispatcher's connection.
//
// # Idempotency keys
//
// The idempotency step (admit_idempotency.go) claims a call's key (the
// hex SHA-256 of tenant and key; under identity.VisibilityOwn of tenant,
// agent and key, so that another agent's key is another key and a repeat
// or a CONFLICT never names a call the caller may not see) in the
// idempotency bucket, binding it to
// the call id, the tool, the SHA-256 of the arguments and, for a call
// answering a tool's request for input, the answers, for the bucket's TTL
// (bus.Config.IdempotencyTTL, --idempotency-ttl: by default, and at most,
// the calls' retention CallsMaxAge, since a key is useful only while its
// call's record exists), not just the calls stream's duplicate window. It
// comes before the approval and overload steps, so that a repeat of an
// accepted or parked call still answers that call. When the key is
// already bound, a call with the same tool, arguments and answers is a
// repeat, answered with the original call id (Submitted.Duplicate; Call
// then waits for that call as GetResult does, and Submit answers its
// terminal response, Submitted.Finished, when it has finished: its result
// or its refusal); anything else answers CONFLICT. A key found bound
// when it is written but gone when it is read was released (or expired)
// meanwhile: it is claimed again, at most three times, and a key that
// keeps changing hands is refused OVERLOADED with retry_after 1s, never
// an error; that refusal claims and records nothing.
//
// A call refused after the claim (its limits, a redeemed token, a
// publish the calls stream does not take, an overload only the counted
// check finds) releases its key: the key's subject is purged from the
// bucket's stream up to and including the claim's own revision, which
// leaves nothing (a KV delete would leave a deletion marker for the key's
// lifetime, one per refused keyed call, and fill the store) and never
// removes a newer claim of the key (one made after this claim expired;
// bus.Config refuses an IdempotencyTTL below the calls stream's
// DuplicateWindow, so a key outlives its call's publishing). When the
// purge fails, the record is replaced, conditionally on the claim's
// revision, by one marked refused: the next call with the key takes it
// over (a conditional update, so only one does) and is admitted as if the
// key were free; a repeat is never answered with the old refusal. When
// that write fails too, the key answers with the refused call (its
// REJECTED event) until it expires; the log says so.
//
// An overload never claims a keyed call's key, and its refusal writes
// nothing. Before the claim the step asks internal/poolview whether a
// store the call writes is past its high-water mark (the calls stream,
// the idempotency bucket, the account) and, for a call published now (not
// parked, not redeeming a token), whether its pool would refuse it
// (Load.Peek; Load.CheckStores for the others). If so, the key is only
// read: a bound key still answers as above (a repeat, or CONFLICT; a key
// marked refused is not bound), and an unbound one is refused OVERLOADED,
// retryable, with the retry_after and message of the store or pool
// refusal; nothing is claimed, recorded or released. A store that fills
// between two reads of its use (every 2s) refuses the claim itself
// (bus.StoreFull: the store's own limit, or the account's or server's
// storage): that call is refused OVERLOADED the same way
// (poolview.FullRefusal, retry_after 30s), never INTERNAL; the refused
// write stored nothing. A calls stream that fills between two reads
// refuses the publish: that call too is answered poolview.FullRefusal
// ("calls"), recorded (its admission record may be out) and its key
// released. All are counted as
// toolwire_dispatcher_overload_refusals_total{cause="store",target=<the
// store>} (a pool's refusal with its own cause and target). retry_after is a fixed 30s, as for every store refusal, and
// not the oldest key's expiry: room comes back as keys expire (in the
// order they were written, at the rate they were written one TTL
// earlier) or when an operator raises the limit, and the replica reads
// the store's use again every 2s.
//
// # Publishing
//
// The publish step (admit_publish.go) first holds the call's concurrency
// slots (limitgate.Gate.Hold: a fast call's result can reach the results
// consumer, which releases them, before the publish returns); a call the
// stream does not take gives back what it took. The call (binary
// protobuf) is published asynchronously on
// toolwire.call.<type>.<tenant>.<provider>.<tool> with the Nats-Msg-Id and
// Nats-Expected-Stream headers (the call id and the calls stream), set
// directly rather than through jetstream's publish options. Only the
// call's acknowledgement is awaited, at most 2s (bus.PublishAsyncTimeout).
// A publish left unanswered (timeout, reconnect, no stream leader) is sent
// again under the same message id, backing off from 50ms to 1s, for up to
// 15s: the duplicate window stores it at most once. 2s, not nats.go's
// usual 5s, so that admission resumes within about 2s of an election when
// the old leader went silent rather than away (a publish sent just before
// the election waits out the timeout); 15s outlasts an election (4 to 9s,
// up to 12s seen on a loaded machine), which 10s did not: calls were
// refused although the cluster was back (docs/reliability.md, "On a
// cluster"); Config.PublishHorizon sets it. A publish that timed out or
// found no stream is reported to the connection's watchdog
// (Config.ConnHealth, bus.Watchdog.Report), which probes the server at
// once and moves the connection off a server gone silent or cut from its
// cluster (2 to 2.5s after a freeze, measured).
//
// An answer is true whatever happens next: a caller is never told "not
// run" for a call that can still run. So a call is refused (OVERLOADED,
// retryable, retry_after 1s, recorded as a REJECTED event, its key
// released; a calls stream that is full, bus.StoreFull, answers as a full
// store: poolview.FullRefusal("calls"), retry_after 30s, counted with
// cause "store") only when no publish of it can have been stored: the
// server refused the first publish (e.g. the calls stream is full), the first
// could not be sent, or every publish until the horizon found no stream
// at all (no responders). Once a publish went unanswered (a timeout, a
// reconnect), nothing but an acknowledgement proves anything: the server
// checks limits before duplicates, so a refusal of a later publish says
// nothing of the earlier one, and 10158 ("duplicate message id is in
// process") means it is being stored. Such a call still unacknowledged at
// the horizon is answered accepted and unconfirmed (Submitted.Unconfirmed,
// the API's `unconfirmed`, PENDING with its id; a caller waiting in Call
// goes on waiting for its result), and the republisher (unconfirmed.go, a
// service of the dispatcher) publishes it again under its message id,
// backing off from 250ms to 5s, until the stream acknowledges it (a stored
// call is acknowledged as a duplicate), or until its deadline (no worker
// starts a call past it) or half the calls stream's duplicate window has
// passed, whichever is first; then it stores the call's ACCEPTED record if
// a partition lost the core one. What is left unconfirmed (given up, over
// the republisher's cap of 10,000 calls, or the dispatcher stopped) is
// answered by the overdue sweeper (internal/maintenance) after the
// call's deadline, with what the records show. When the caller's context
// ends while the acknowledgement is awaited the call may be stored, so its
// key and admission record are kept and it is handed to the republisher
// too.
//
// # Records of admission, rejection and cancellation
//
// An ACCEPTED event in the events stream is how any replica tells a
// pending call from an unknown id. It is a core publish that the stream
// captures, sent right after the call on the same connection (so it is
// stored after the call) and not acknowledged: a second acknowledgement
// per call cost a quarter of the throughput. Submit sends it at once. For
// a call waited on with Call it is queued (package delayed) and sent only if
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
// A waiting caller is told only a result the results stream has stored:
// the result GetResult serves for ever after. A worker's JetStream publish
// also reaches core subscribers when the stream refuses it or never
// answers it (a cluster whose results stream has no leader), and a
// redelivery may then store another result, so a core message is never an
// answer.
//
// Start makes one consumer per replica on the results stream, filtered to
// toolwire.result.*.<Config.Name>.* and starting after the stream's last
// message: an ordered consumer (no acks, memory storage, one replica),
// which the client makes again from the next stream sequence when it
// misses two heartbeats (1s apart), when the connection reconnects or when
// a delivery is out of order, so no stored result is skipped. Its pull
// requests buffer at most 64 MiB and expire after 5s; Stop deletes it, and
// an inactivity threshold of 1m is the backstop for a replica that dies.
// Its goroutine only routes the bytes to the map of waiting callers by
// call id; each waiter decodes its own result. Call waits up to the
// request's wait (0 = Config.DefaultWait, 60s; at most Config.MaxWait,
// 15m); when the wait passes first it looks the stored result up once more
// (a get on the call's own result subject that only the stream's leader
// answers: a replica that lags could say "none" for a stored result) and
// only without one answers PENDING with the call id; the call keeps
// running. After every reconnect of the replica's connection, and every
// failure its results consumer reports (missed heartbeats: the consumer's
// server died), the stored result of every waiting caller is looked up
// the same way (a pass stops at the first lookup that fails, the stream
// perhaps electing a leader, and
// is tried again up to six times, backing off from 250ms): a result stored
// meanwhile is answered without waiting for the consumer to be made
// again. Config.Name (default
// the host name plus a random suffix) must be unique among live replicas;
// results survive a name change, since they are found by call id.
//
// GetResult answers from any replica, including one started after the call
// was submitted: a direct get of the last message on
// toolwire.result.<tenant>.*.<call_id>; without one, a REJECTED event
// answers the rejection, an id without any record (and not minted in the
// last 10s) is UNKNOWN, and anything else is PENDING. With a wait it
// subscribes (a core subscription) to the result before looking, so none
// is missed, looks at the stream again every 250ms, and waits up to the
// wait (at most MaxWait); its last look, before it answers PENDING, reads
// the stream's leader. A message on that subscription is only a hint:
// GetResult answers the result stored on its subject, and one not stored
// (yet) is found by a later look. An id that is not a ULID is UNKNOWN.
//
// With an archive store, a result older than the results stream reaches
// (its first message was stored after the call's time less a minute) is
// read from the archive (archived.go: findResult, for GetResult, Watch's
// first look, Cancel and a call that continues another), checked as a
// live one (believed.Reader.ReadArchived); the call's tool and agent
// come from the archived call the same way (storedCall, archivedCall). A
// call within the window never reads the archive, nor do a wait's later
// looks, nor an id no stored call stands behind (callTool ""); and the
// archive is read up to the call's deadline (remembered with its tool)
// and an hour, or 720h after its time without one.
//
// # Decision: how a replica learns that a result is stored
//
// Issue 12 left the means open (a consumer on the results stream, stream
// RePublish, or a confirming read before answering); it was chosen by
// measuring the nats path, go run ./cmd/toolwire-bench -path nats -n 20000
// (64 in flight), on the 2-core development VM, 2026-11-23, in interleaved
// rounds. Other helpers loaded the host (1-1.6 cores in most rounds), so
// calls/s swung between identical rounds (7,900-25,700 for the old code);
// CPU and allocations per call are the steadier figures:
//
//   - the core subscription (before): 61.5-73.8 µs of CPU per call (median
//     70.2 over eleven rounds), 236-237 heap allocations; 22,013-23,291
//     calls/s in the three rounds on a quiet host (other load at most 0.22
//     cores);
//   - the ordered consumer (chosen): 69.7-79.2 µs (median 76.0 over eleven
//     rounds), 245-246 allocations; 21,376 calls/s in its one round on a
//     quiet host (other load 0.13 cores), and in the busy rounds the same
//     range as the core subscription's. That is about 8% more CPU per call
//     and 3-8% fewer calls/s, within today's spread between a quiet and a
//     busy host (BENCHMARKS.md: 22,061-29,684 calls/s at 64 in flight);
//     the extra work is mostly the server's (consumer delivery: a read of
//     the stored message, a reply subject, a timer);
//   - a confirming read (the core message as a hint, then a direct get of
//     the result before answering): 91.7-109.1 µs, 308-309 allocations
//     (three rounds): a request per call.
//
// RePublish was not measured: its message is a core message too (lost
// across a reconnect, like the subscription's), and only the leader that
// applied the write sends it, so a leader lost between storing and
// republishing leaves a stored result nobody announces, where the consumer
// resumes from the stream sequence it reached. A push ordered consumer
// (nats.go's legacy JetStream API) cost no less than the pull one and was
// not kept.
//
// # Delegation chains
//
// A call may name the call on whose behalf it is made
// (CallRequest.parent_call_id): an agent service running a sub-agent for
// a call names that call in the sub-agent's calls (docs/delegation.md).
// Where issue 31 left it open:
//
//   - The parent is checked like any id the caller names (delegation
//     step, admit_delegation.go): a ULID of a call of the caller's tenant
//     that the caller may see (Config.AgentVisibility: under
//     VisibilityOwn the sub-agent's service uses a key of the same agent,
//     or one with the admin scope), else NOT_FOUND "parent call X not
//     found", the same words for another tenant's call as for a made-up
//     id. It must be on its way: a finished parent (a result, or a
//     rejection) and a parent parked for an approver are CONFLICT, a
//     parent with a cancel tombstone is CANCELLED. A chain that cannot be
//     read or written is INTERNAL (logged, not told). Every refusal is
//     recorded REJECTED like the others; the bounds' refusals carry a
//     deny decision with rule "delegation.max_depth",
//     "delegation.max_fan_out" or "delegation.max_descendants". A limits
//     bucket too full for the chain's keys is OVERLOADED with
//     retry_after (poolview.FullRefusal), never INTERNAL. A repeat of a
//     bound idempotency key is answered as the original call instead of
//     refused for its parent's state or a bound (repeatOr): the parent
//     changed since, not the call.
//   - Depth: a call's depth is its parent's plus one (a call without a
//     parent is 0); a parent already Config.MaxDelegationDepth (8, at
//     most 64) below its root takes no child. Fan-out: a parent with
//     Config.MaxDelegationFanOut (256, at most 4096) children takes no
//     more. Size: a chain holds at most Config.MaxDelegationDescendants
//     (1024, at most 4096, the cascade's bound) calls below its root, so
//     one Cancel of the root reaches them all.
//   - The bounds are counters (countChildStep, chain.go countChild): per
//     parent the count of its children, per root the count of its
//     chain's calls, in the delegation stream (bus.Config.
//     DelegationStream, a counter stream). After its link is written and
//     its parent's state read, a call adds itself to its parent's count,
//     then to its root's, each in one request (shared by the children
//     admitted together: "Shared requests") whose answer is the count
//     with the call in it (bus.AddToCounter), and is refused past the
//     bound. The stream's leader applies the increments of a counter in
//     order, whichever replica sent them: two children racing for a
//     parent's last place get two different counts, and exactly one is
//     admitted. A refused child, or a repeat answered as an earlier
//     call, is taken out of the counts it was added to (forgetChain,
//     with its keys); a request that failed may have counted it or not
//     and is not taken back (fails closed: the place is held until the
//     counter expires). A child counts from its admission (or parking)
//     until its counter expires, whether it has finished or not: a
//     counter expires whole bus.Config.CancelTTL after its last change,
//     so a parent that takes a child at least once a day keeps counting
//     children older than the day (their keys expired, stricter than the
//     keys were). Before (issue 31), admission listed the keys under the
//     parent and under the root (dlgr.<tenant>.<root>.<call>, no longer
//     written) after writing its own: an ordered consumer on the limits
//     bucket per listing, two per delegated admission, each reading
//     every key under the prefix — quadratic in a parent's children —
//     and two children racing for the last place could both be refused.
//     Not a compare-and-set counter key in the limits bucket: two
//     replicas racing would retry each other's revisions, where the
//     counter stream takes both increments in one round trip each; and
//     a counter stream cannot be discard-new nor carry per-message TTLs
//     (a stream of its own). Left open: during a rolling upgrade from a
//     release that listed keys, the children admitted by older replicas
//     are not in the counts (a parent with children from before the
//     upgrade may take up to the bound again), and a full delegation
//     stream drops the counter changed longest ago (internal/bus,
//     "Limits"), whose bound restarts from 0.
//   - Reading the parent (parents.go): its state is read for every
//     child, so a child of a parent whose result is stored is refused,
//     whichever replica the result was routed to. The first child a
//     replica admits for a parent reads its records as GetResult does
//     (its result and its events on every dispatcher's subjects: two
//     stream-info requests to resolve the wildcards, an event's
//     signature); children admitted meanwhile share that read
//     (lookParent, a singleflight per parent on a goroutine of its own,
//     bounded by parentLookTimeout; each child waits as long as its own
//     context lasts), so a child that joins a read under way gets a
//     state at most that read's time older than its admission. A
//     pending parent known stored in the calls stream (this replica's
//     publish of it was acknowledged, or its call was read from the
//     stream: not from its approval record, nor from its ACCEPTED
//     record, which is sent before the stream acknowledges the call and
//     may be followed by a REJECTED one) is remembered (parentsSeen, a minute, at most
//     16,384, dropped when this replica's results consumer sees its
//     result or a child finds it): its tool, its link (read then, once
//     it is known published: its key was written in its own admission;
//     a child of a parent not remembered reads the parent's state before
//     its own link is written, and only its tombstone after) and the subject of
//     its result, that of ToolCall.dispatcher, where every writer of a
//     call's result puts it (workers, approvals, cancels, the reaper,
//     the overdue sweeper). Its next children read that one subject (and
//     the archive, as GetResult does) and its tombstone. Not a cache of
//     "running" for a while: a child admitted for a parent that finished
//     on another replica's watch would be a child nobody waits for.
//     Measured (toolwire-bench -shaped, BENCHMARKS.md): the shaped calls
//     went from 0.37x to 0.50x the plain calls' rate.
//   - Shared requests (groupcommit.go): the children of one parent
//     admitted at the same time share the reads of its tombstone (both:
//     after the link is written, and before the publish) and of its
//     result, and the adds to each counter. A child with none of its
//     kind in flight makes its own request at once; children that come
//     while one is in flight gather, and the first of them makes one
//     request for all when it ends (a group commit): each request starts
//     after every child it answers joined, so the ordering with a
//     cancel's cascade holds as with one read per child, and a counter
//     grows by the number of children gathered, each taking one of the
//     counts up to the sum returned (no two the same). Not a
//     singleflight that joins a read already under way: that read may
//     have started before the child's link was written. A child that
//     leaves while its group's read is in flight gets its context's
//     error (the read is made for the others); a counter add is waited
//     for whatever the child's context does, so that a child counted
//     knows it and is taken back when refused. The child that makes a
//     group's request waits for the one in flight and then for its own
//     whatever its context does; each is bounded by groupCommitWait
//     (10 s). One failed request fails every child it was made for.
//     Measured (toolwire-bench -shaped, BENCHMARKS.md): from 0.40x to
//     0.59x, and with the one key below (Records) 0.67x.
//   - Records (chain.go): the limits bucket, which every replica shares
//     and whose keys carry their own TTL, holds one key per child under
//     its parent (dlgk.<tenant>.<parent>.<child>) whose value is the
//     child's link (parent, root, depth): a cancel and GetDelegation
//     list a parent's keys, and a call's own link is read by its id alone
//     (linkOf: the one key dlgk.<tenant>.*.<call>, resolved and read from
//     the bucket's leader, two requests) when a child of it is admitted
//     on a replica that does not remember it, and by GetDelegation. The
//     key lives bus.Config.CancelTTL (24h, as a tombstone): a call
//     delegated more than that long ago is no longer reached by its
//     parent's cancel. A refused child's key is purged (a marker that
//     lives a minute: the bucket has no MaxAge). Before (issue 31) a
//     call's link was a key of its own (dlg.<tenant>.<call>) and the key
//     under the parent held nothing: two writes a delegated call, where
//     one is now. Upgrading: a key without a value (an older release's)
//     has its link read from dlg.<tenant>.<call>; an older release
//     reads no link for a call this one admitted, and takes it for the
//     top of its chain (depth 0, its own root), so during a rolling
//     upgrade the children that older replicas admit below such a call
//     count their depth, their root's chain (max_descendants and a
//     `key: chain` limit) and their root_call_id from there, and its
//     GetDelegation shows no ancestors above it. Not a bucket of its own: that would be a
//     new store in the layout's reservation (bus.Config.Stores), the
//     chart and the NATS permissions, for one small key per delegated
//     call; only calls that name a parent write it. The cost: they share the bucket
//     with every tenant's limit counts, and no bound per tenant caps
//     them yet (docs/operating.md, Sizing).
//   - The chain travels in the call (Caller.parent_call_id,
//     root_call_id, depth, parent_tool), set by the dispatcher after the
//     check, never taken from the request otherwise, so the worker, the
//     ACCEPTED record, the audit and the policy (caller.parent — the
//     parent's tool —, caller.parent_call_id, caller.root_call_id,
//     caller.depth) all read the same chain. A sub-agent's scope is a
//     policy rule on caller.parent (docs/delegation.md): no second
//     mechanism; it binds cooperating callers only (parent_call_id is
//     the request's), a sub-agent to be confined gets its own agent key.
//   - Cancel cascade: Cancel of a call that is not unknown (cancelled
//     now, already requested or already finished) then cancels its
//     descendants (cancelDescendants): breadth first, every child listed
//     under each parent whatever its own state (a finished child's
//     children may still run), at most 4096 calls per Cancel (more
//     than a chain holds: MaxDelegationDescendants), each cancelled as Cancel would (tombstone, event, a parked
//     one denied) by the parent's canceller, whichever agent made it.
//     The tombstones are what every worker of every pool watches, so the
//     descendants stop on whichever replica admitted them. No child
//     escapes a cancel that races its admission: the child writes its
//     key before it reads its parent's tombstone, the cancel writes the
//     tombstone before it lists the keys, and both reads are answered by
//     the stream's leader (bus.KVGetFromLeader, bus.KVKeysFromLeader): a
//     direct get or a key lister may be served by a replica that has not
//     yet stored what the leader acknowledged, and the two writes would
//     then pass each other unseen. A listed child may still be in
//     admission, long after its delegation step (hooks, policy, an
//     approval, a limits wait), unknown to cancelCall: the cascade writes
//     the tombstone of every listed child all the same (its key proves a
//     dispatcher admits it; tombstoneAdmitting), and the publish step
//     reads the parent's tombstone again right before it publishes a
//     delegated call (refused CANCELLED then). The cascade runs within the
//     Cancel request; a Cancel that fails part-way (a store error) is
//     made again by cancelling the parent again (a second Cancel walks
//     the tree again).
//     It still lists each parent's keys (the subjects from the limits
//     stream's leader, then a leader get per key): once per Cancel and
//     parent, not per admission, bounded by the 4096 calls it reaches;
//     the counters hold no ids to walk.
//   - Seeing a chain (GetDelegation, delegationview.go): the same
//     records answer it, read under the caller's tenant (another
//     tenant's call is never reached, and the call itself answers
//     UNKNOWN as in GetResult). Ancestors follow the links up, at most
//     MaxDelegationDepth; children are the keys under the call, sorted
//     (ULIDs: oldest first), at most MaxDelegationChildrenShown
//     described, the rest counted. Each described call is read as
//     GetResult reads it (its tool and state), and a call the caller may
//     not see (reaches) is left out — a child skipped and not counted, an
//     ancestor ending the list — so the answer never tells what
//     per-agent visibility hides. No index of its own: the limits bucket
//     lists a parent's children by key prefix (the subjects from the
//     limits stream's leader, then a leader get per key, no consumer:
//     GetDelegation and a cancel's cascade list, once per request and
//     parent, where admission does not; the counters hold counts, not
//     ids). Its work is bounded by the fan-out: at
//     most MaxDelegationFanOut children (256 by default, 4,096 at most)
//     are listed, and under per-agent visibility each is looked up once
//     (the owners cache answers repeats). A cap on the lookups of hidden
//     children was tried and dropped: a caller knows its own children,
//     so one left out past the cap told it how many it may not see came
//     first.
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
// A queued call — one no attempt of which started, behind busy workers or
// in a pool with none — is answered before Cancel returns, by the
// cancelling replica (settleCancelled, cancel_settle.go): not when a
// worker frees up and takes it (finding 6 of issue 32: 4.6–8 s). The
// order makes it safe:
//
//   - the tombstone first: a worker that registers the call after it
//     finds it (its watch, or a look-up) and does not run it;
//   - then the CANCEL_REQUESTED, acknowledged, on the events subject of
//     the replica that admitted the call (cancelSubject: the subject of
//     its ACCEPTED record, read from the leader, or, if it was parked,
//     of the dispatcher its approval record's call names — the parking
//     replica, or the redeeming one for a redeemed approval token; not
//     of its newest event, which another replica may have written), which is the one
//     its workers store their STARTED on and read back before a tool
//     that is not safe to rerun runs: a STARTED stored after the request loses to it and that
//     attempt never runs (internal/worker, claim.go);
//   - then the call's events, read from the leader: only a call with its
//     ACCEPTED record, the request on that record's subject, no attempt
//     event (STARTED, PROGRESS, RETRYING, FINISHED) and no approval
//     record (an approved call's ACCEPTED record was its approver's in
//     records stored by earlier releases) is answered. CANCELLED, meta.source "dispatcher", who
//     cancelled and why, side effects NONE — UNKNOWN for an idempotent
//     tool that is not read-only, whose short attempts record no STARTED
//     (one may have begun in the instant before its worker saw the
//     tombstone; calling it again is safe).
//
// The answer is published as a worker's is (signed, first believed wins:
// believed.Reader.Publish), on the admitting replica's results subject, so
// its waiting caller, Watch and GetResult on every replica see it; the
// worker that takes the call later finds the tombstone, or the request,
// and its own answer meets this stored one and keeps it (one terminal
// record). Anything else — an attempt recorded, no admission record yet
// (a waited-for call's record is sent after 50ms), events that cannot be
// read, an answer not stored — is left to the worker, as before: it
// answers when it takes the call, or when the running attempt ends. A
// cancel of a call with events reads them twice more than it did: once
// for the admission record's subject (before the request), once to
// decide (after it); both off the calls' hot path.
//
// Watch subscribes to the call's result, looks for the stored result and
// any event of the call, then replays the call's stored events from
// admission on through an ordered consumer, whichever replica admitted it,
// and ends with a FINISHED event carrying the terminal response once the
// stored events are sent (the stored result: a message on the result's
// core subscription is only a hint, as for GetResult); a REJECTED event
// ends it too. An id that is not a ULID, or has no record and was not
// minted in the last 10s, is ErrUnknownCall at once (no consumer is
// made); a recent id without any record gets Config.WatchGrace (5s) to
// show one, then is ErrUnknownCall. A chunk of partial output
// (tool.Partial) whose (attempt, partial_seq) was already sent, or is
// older, is dropped (PartialSeen, also used by the dashboard; the MCP
// relay reads through Watch): a signed chunk the worker credential stores
// again is streamed once.
// A result reaches core subscribers before the stream stores it, so a
// result published just before the Watch subscribed can be in neither
// place at the first look (a fast call waited on in Call has no other
// record): Watch looks the stored result up again every 250ms during the
// grace and every 30s after it, so it never waits for ever on a result it
// missed. Its consumer is deleted when the Watch ends, however it ends (an
// ordered consumer's Stop leaves it on the server), with an inactivity
// threshold of 10s as the backstop when a dispatcher dies mid-Watch.
//
// # Approvals
//
// The approval step (admit_approval.go) sends an ask to be parked
// (parkCall: its rates and budgets counted, no slot held while it waits;
// approve.go: park, after its idempotency key is claimed) and a call an
// approval token covers to redeem the parked one (approve.go: redeem).
// The flow itself — parking, decisions, tokens, grants, the sweep — is
// internal/approvalflow's (its doc.go), run by Dispatcher.Approvals; it
// publishes and answers calls through the core's paths (approve.go:
// approvalCore). Before an approved call is published, approvalCore's
// Denies decides it again as admission would now: its session read from
// the sessions bucket (ended: SESSION_INACTIVE) and the policy in force
// in the session's mode now (the mode's deny, or a mode no longer
// declared: MODE_RESTRICTED; another deny: PERMISSION_DENIED).
//
// # Caps per caller
//
// A caller is a tenant and agent. On each replica it may hold at most
// Config.MaxWatchesPerCaller (100) Watches and Config.MaxWaitingPerCaller
// (10,000) requests waiting in Call or in GetResult with a wait; past
// either, Watch answers ErrTooManyWatches and Call or GetResult
// ErrTooManyWaiting (the API's resource_exhausted). Call takes its slot
// before admission, so a refused Call leaves no trace; every slot is given
// back however the request ends. The caps are per replica, not per
// installation: they bound what one caller can make one process hold.
// Config.MaxWaiting (100,000) still bounds all callers of a replica.
//
// # Reaper, retry mover, dead-letter retries, orphan and overdue sweepers
//
// The dispatcher's background maintenance services are
// internal/maintenance's (Reaper, Mover, DLQRetries, Sweeper,
// OverdueSweeper; see its doc.go): Start starts them with everything
// else, configured from Config.Name, Config.OrphanSweep,
// Config.OrphanGrace and Config.Overdue. The ACCEPTED record carries the
// call's deadline and spec version for the overdue sweeper.
//
// # Start and Stop
//
// Start starts what the dispatcher runs besides its callers' requests, one
// startstop.Group whose order is written once (lifecycle.go, services),
// each part a startstop.Service: the results consumer, the reaper, the
// retry mover, the dead-letter retries, the registry announcements (the
// workers' tools, checked and written: internal/registry, Service), the
// after-hook service (internal/hooks), the queue of admission records, the load view
// (internal/poolview), the capacity sampler (internal/capacity: the
// stores' growth and time to full, full at StoreHighWater for the stores
// that refuse calls, for the metrics), the rechecks of waiters after a reconnect or a
// failure of the results consumer, the orphan and overdue sweepers, the pool listing
// (internal/poolview), the approval flow (internal/approvalflow: the grant
// index, the approval tracker and the sweep) and the limits' slot renewal
// (internal/limitgate). A Start that fails stops what it had started. Stop(ctx) marks the dispatcher stopped (a later Call gets
// ErrStopped), releases every waiting caller with ErrStopped, and stops
// everything Start started, newest first, each in turn, waiting until it
// has ended (the last callback of each consumer returned, the results
// consumer deleted on the server). When ctx ends first it returns ctx's
// error; what was told to end still ends, and a later Stop waits for it
// again. Stop is idempotent; a stopped dispatcher does not start again.
// Watches are not Stop's: each ends with its request.
//
// # Intents
//
// Call with apply_intents (which needs a session) applies the response's
// intents with the reference applier (internal/intents) to the call's
// session; when that fails the response is still answered, with the reason
// in apply_error. ApplyIntents applies a finished call's intents later
// (each intent once); GetSession reads a session's state.
//
// Intents are checked where they are applied (sessions.go:
// applyResult), not only by the worker that produced them: a stored
// result is not proof that a well-behaved worker checked it. Nothing is
// taken from the result but its intents: the tenant, session, tool and
// spec version are the call's as a dispatcher admitted it. Call with
// apply_intents uses the call it admitted itself (o.Session, the pinned
// spec version; a repeat of an idempotency key answered with an earlier
// call's result reads that call as stored); ApplyIntents reads the stored
// call (callargs.go: storedCall, from the call's approval or the calls
// stream, which only dispatchers write). A result naming another tool
// than its call's has every intent refused. Each intent is screened
// (intents.Screen) against the intent catalog and the intents the call's
// spec version declares, read from the registry. The valid ones apply;
// the others change nothing and are refused: recorded in the session's
// log as one entry per call (intents.Summary: how many, the first reasons,
// a digest, never a payload), answered in CallResponse.refused_intents or
// ApplyIntentsResponse.refused (the first intents.MaxPerResponse one by
// one, then the summary), logged at WARN ("intents refused at apply") and
// counted (toolwire_dispatcher_intents_refused_total) when first recorded.
// A spec version the registry no longer holds has every intent refused; a
// registry read that fails is an error (apply again later), never a
// refusal. ApplyIntents on a finished call that is not stored (refused at
// admission, or past the calls stream's retention) is ErrCallNotStored.
//
// # Sessions
//
// Admission reads the session a call names (admit_session.go) from the
// dispatcher's session view (internal/sessionview, started first by Start
// and stopped last by Stop): a watch of the sessions bucket keeps its
// cache current on every replica, and a session it does not hold is read
// from the bucket. A call in a session END_SESSION ended — applied by any
// replica, or by any orchestrator writing the bucket with the reference
// applier — is refused SESSION_INACTIVE (not retryable, nothing queued,
// recorded as a REJECTED event; the message names the session and the end
// reason), on every face, since every face admits through here. A replica
// that applied intents reads the session again (View.Refresh), so that its
// own next call sees the end at once; another replica sees it when its
// watch delivers the write. A call without a session is not looked up.
//
// The orchestrator's session RPCs (sessionadmin.go, sessions.go):
// SetSessionMode and EndSession (the admin scope, ErrNotAdmin) apply a
// SET_MODE or END_SESSION intent with the reference applier — the same
// record, compare-and-set write and log entry as an intent a tool
// returns — and read the session again, as above. EndSession takes a
// reason of at most MaxEndReasonBytes (ErrBadEndReason); ending an ended
// session applies nothing and answers it (the first end's reason stands,
// also when two ends race: internal/intents). ListSessions lists a page
// of the caller's tenant's sessions (intents.List: bounded reads of the
// tenant's keys, in the order of their last update, oldest first, without
// logs and state values), filtered by state and mode. A session has no
// owner agent, so under VisibilityOwn listing needs the admin or approve
// scope (identity.Identity.SeesEveryAgent; ErrSessionsHidden); under
// VisibilityTenant any key of the tenant lists them.
//
// The session rules of the policy in force for the caller's tenant
// (policy.SessionRules, the document's sessions: section) close the
// escapes a session named by its caller leaves open — an agent whose
// session was restricted or ended leaving the session out of its calls,
// or naming a fresh one — in the same step, on every face:
//
//   - required: a call naming no session is refused PERMISSION_DENIED
//     ("... requires every call to name its session (sessions.required)",
//     the suggestion naming CallRequest.session, MCP's
//     _meta["io.toolwire/session"] and toolctl's --session), recorded as a
//     REJECTED event whose decision is a deny of the policy version by
//     rule "sessions.required".
//   - opened_only: a call naming a session the sessions bucket does not
//     hold (sessionview.State.Exists: never written, or deleted or
//     purged) is refused SESSION_INACTIVE ("session ... was never
//     opened"), recorded with rule "sessions.opened_only". A session is
//     opened by SetSessionMode (an empty mode opens it without one:
//     `toolctl session mode SESSION ""`), by the reference applier
//     applying an intent to it, or by ending it (then it is ended, and
//     refused as such). No other RPC opens one.
//   - default_mode: a call whose session has no mode, and a call naming
//     no session, is decided in that mode (caller.mode, as published, so
//     the worker decides in it too); a session the orchestrator put in a
//     mode is in its own. ListTools, the exports, GetTool and MCP
//     tools/list hide what it hides for such callers.
//
// A hook's own call (which names no session) is exempt. A parked call is
// decided again (approvalCore.Denies) in the mode in force when it is
// approved: its session's, else the default mode.
//
// # Versions locked per session
//
// A session can lock the spec versions its calls run. Pinning is in force
// for a call that names a session when the request says
// pin_session_versions or the policy in force for the caller says
// sessions.pin_versions in a layer that applies to it (the tenant's, the
// caller's agent's, the session's mode's: policy.Policy.PinsVersions;
// any layer turns it on, none turns it off). The pins are the session's
// record's (Session.pinned_versions, tool name → version), read at
// admission from the session view the session step already read: a call
// without a session, or without pinning in force, reads nothing more (a
// policy that pins nothing is not even asked per caller:
// policy.Policy.PinsAnyVersions).
//
// With pinning in force, lookup (admission.resolveVersion) runs the
// version the session pins for the tool, as if the request named it in
// spec_version. A spec_version other than the pin is refused CONFLICT,
// not VALIDATION: the request is well formed, but it contradicts the
// session's state, and the orchestrator can resolve it (re-pin). When
// the session pins nothing for the tool yet, the version lookup resolves
// (the current one, or the request's spec_version) is pinned by the pin
// step, after scopes and pool, so that a call of a tool the caller may
// not call, or that no pool serves, pins nothing: intents.Applier.Pin,
// by compare-and-set, the first pin standing (of two calls racing, the
// later runs the earlier's version, looked up again), then View.Refresh
// so that this replica's next call sees it at once. So a pin is written
// once per session and tool; a pin is written whether or not the policy
// then allows the call (the session has seen that version). A session
// pins at most intents.MaxPins (256) tools; one more is refused CONFLICT.
// A write that fails is INTERNAL: a call never runs unpinned when it
// should have been pinned.
//
// A pinned version that cannot run is refused NOT_FOUND naming the tool,
// the pinned version and how to re-pin — never swapped for the current
// version: the registry no longer holds it (deleted or purged: the
// registry Store forgets it), it is disabled, or the pool check finds no
// pool for the tool (the pool check is per tool, not per version). The
// orchestrator re-pins with ClearSessionPins (admin scope, like
// SetSessionMode; all of a session's pins, or one tool's), after which the
// session's next call of the tool pins the version current then. An
// ended session's calls are refused SESSION_INACTIVE before lookup, so
// its pins are moot.
//
// # Arguments read back
//
// CallArguments (callargs.go) returns a stored call's arguments as
// admitted, for a face that keeps them redacted (the MCP tasks bucket);
// ApplyIntents reads the whole stored call the same way (storedCall):
// from the call's approval when it was parked, else the first message
// published under the call's id on the calls stream, read on the subjects
// of the caller's tenant (and the call's tool, when given) from the time
// in the call's id less a minute (clock skew) until the stream's messages
// are past that time plus a minute and half the duplicate window (how long
// an unconfirmed call is published again). The scan reads through one
// plain pull consumer (no acks, one replica, in memory) with FetchNoWait
// and checks ctx between fetches; the consumer is deleted when it ends
// (the server drops it after 30s of inactivity if that fails). Not an
// ordered consumer: nats.go v1.55's deletes and makes its server consumer
// again on every fetch, with a context of its own (up to 33s of retries
// the caller's context does not end; a reviewer measured a GetResult
// answered 28s after the election). A fetch that returns nothing ends
// the scan only once the consumer's info says nothing is left (a fetch
// nobody answered also returns nothing, with no error). A scan the
// cluster cannot serve now (bus.Unavailable: no responders, a stream
// without a leader, a request unanswered) is made again, 100ms apart
// doubling to 2s, until the caller's context ends or for 2 minutes at
// most (then its last error: a refused create reads as a timeout, and
// would be retried forever for a caller with no deadline); each request
// of a scan is bounded to 5s (one sent during an election may never be
// answered). So GetResult of a call another replica admitted rides out
// the calls stream's election as the leader reads (bus.LeaderRetry) do.
// Another tenant's call, a call of another tool, or one past the
// stream's retention is ErrCallNotStored.
//
// # Output
//
// GetOutput (output.go) reads the output text of a finished call (package
// output: its text blocks joined by newlines) by byte range or by an RE2
// pattern, all of it also when the worker cut the inline response to the
// tool's limits: then from the output text the worker stored in the blob
// store (ResponseMeta.full_text), streamed, so memory stays bounded by the
// read's limit (at most 1 MiB) whatever the output's size. A call is found
// like GetResult finds it, on the caller's tenant's result subject, so
// another tenant's call is unknown (or pending, for a recent id); a result
// whose references leave the call (another bucket, another call's object)
// is not followed. A result stored with the whole response only (no
// output text: an older worker) is decoded in memory, up to 64 MiB. Each
// read counts as one of the caller's waiting requests
// (MaxWaitingPerCaller) and ends after a minute (it reads the blob from
// its start, so time grows with the offset). A bad pattern or a negative
// range is invalid_argument; an output the blob store no longer holds is
// not_found.
//
// # The API server
//
// The Connect API (DispatcherService) is internal/api, a face over this
// core: its doc.go says how requests are authenticated, bounded and
// answered. ListTools shows what VisibleToolsFor returns, GetTool what
// VisibleToolFor returns (toolview.go: executor configuration to the
// admin scope only); ListTools with a session shows VisibleToolsIn: less the tools the
// session's mode forbids outright (policy.Policy.Hidden with caller.mode;
// every tool for a mode the policy in force does not declare, which
// admission would refuse), the session's state read from the session
// view as admission reads it; a session without a mode, or no session,
// lists as the policy's sessions.default_mode (VisibleTools, the
// dashboard's, and VisibleTool too); ListTools with a model: less
// the tools the toolset of the model's family hides or substitutes, a
// tool with a variant listed with the variant's input schema (a copy of
// the spec; docs/toolsets.md) — the exports are made from that list;
// every ListTools also shows each tool as the spec's definition for the
// model's family and the session's mode has it, before the toolset
// (offeredAs: hidden, or its description and schema; chosen at each list,
// never stored per session); GetTool with a model shows the tool as that
// list has it for the model and the default mode (registry.ErrNotFound
// for one the toolset or a definition hides), without one the registered
// spec; VisibleTools, the dashboard's tools page, applies no definition;
// the dashboard's views of pools and tools are uiview.go's.
//
// # Policy
//
// After the before-hooks, the policy step (admit_policy.go) decides the
// call by the policy in force for the caller's tenant (Config.Policies;
// internal/policystore's Holder in the dispatcher process): the tenant's
// own document, else the installation document (--policy), else none
// (allow, but tools that require approval ask), on the arguments parsed
// once per admission (admission.policyArgs). An approval token the call
// presents is verified first (approvalflow.Flow.VerifyToken) and taken off
// the call whatever happens: it is never stored or published. A deny is answered PERMISSION_DENIED with the
// deciding rule's reason (its id when it has none), never the rule's
// text, and recorded on the REJECTED event with the policy version and
// rule id; an allowed call carries both (ToolCall.policy_version,
// policy_rule) and its ACCEPTED event records them (policy.go). ListTools,
// GetTool and the unknown-tool hint hide the tools an unconditional deny
// covers for the caller (policy.Policy.Hidden); their calls are still
// decided, and denied, by the policy.
//
// The policy RPCs (ApplyPolicy, RemovePolicy, GetPolicy,
// ListPolicyVersions, Explain) are internal/api's ("Policy RPCs" in its
// doc.go); internal/policyops does their work.
//
// # Decisions on approvals
//
// See internal/approvalflow's doc.go, "Decisions on approvals".
//
// # Hooks
//
// The hooks are internal/hooks (its doc.go is their specification).
// Admission names the after-hooks in the call (admit_afterhooks.go) and
// runs the before-hooks (admit_beforehooks.go; hooks.go) after the JSON
// Schema and before the policy; a before-hook's ask is left to the policy
// step, where a deny still wins. A hook's own call (hooks.IsHookCall) is
// held to no MaxArgsValues, loop guard or limits. The after-hook service,
// which runs the after-hooks for the workers, starts and stops with the
// dispatcher.
//
// # Loop guard
//
// For a call the policy allowed (one already asked goes to its approver),
// the loop guard (admit_loopguard.go; DESIGN §6: after the policy, before
// the limits) counts how many times in a row the same call, or the same
// cycle of up to three calls, was made in its session (or run) — a call
// being its tool and the canonical form of the arguments that make it
// different (registry.Entry.Loop, policy.LoopFields: nulls, declared
// defaults and arguments the tool marks as noise left out) — in the limits bucket that
// every replica shares (limits.Store.Repeat), and from the document's
// thresholds (defaults 3, 5, 10) warns (loop_count on the call, its
// ACCEPTED record and its response's meta), asks (the call is parked,
// rule "loop-guard") or denies (PERMISSION_DENIED, rule "loop-guard").
// Where the issue was silent: it is on whenever a policy document is in
// force (none, no guard, as no rules); calls without a session (run) are
// not guarded; it fails open when the bucket cannot be reached (a safety
// net: the limits, which must hold, fail closed); only the document's own
// section can exempt tools, never an agent layer, a grant or a caller.
//
// # Limits and budgets
//
// The limits of the policy in force, the concurrency slots held for the
// calls admitted here and the usage reads are internal/limitgate's (its
// doc.go, "Limits and budgets"). The limits step (admit_limits.go,
// limitgate.Gate.Take) is the last before the publish; the publish step
// holds the slots (Gate.Hold), and results.go releases them when the
// call's result arrives (Gate.Settle). An asked call is counted when it is
// parked (its rates and budgets, no slot); a hook's own call is not
// counted.
//
// # Latency budgets
//
// A soft latency budget (docs/policy.md, "Latency budgets") is never a
// failure. The latency step (admit_latency.go) resolves a call's budget:
// the tightest of its spec's timeouts.latency_budget and the entries of
// the policy in force that apply (policy.Policy.LatencyBudgetFor, in the
// call's session mode, caller.mode as the session step read it: an entry
// that names a mode applies to the calls of sessions in that mode only),
// writes it into the call (ToolCall.latency_budget: a dispatcher's
// record, like accepted_at, that every replica can read) and watches the
// call in this replica's memory (latencybudget.go, before the publish: a
// fast result can come first; a call never queued is forgotten). A
// parked call, and so an approved one, has no budget.
//
// The budget is measured from the call's admission (ToolCall.accepted_at,
// the admitting replica's clock) to the storage of its result (the
// results stream's timestamp of the message): what a caller waiting for
// the answer lives through, queueing and retries included, from times the
// dispatcher believes (the worker's started_at, finished_at and duration
// are its own claims). Two hosts' wall clocks: their skew is in the
// measure. Every read measures the same way from the same three stored
// values, so every answer agrees: the answer in Call, an idempotent
// repeat, GetResult and a Watch's FINISHED on any replica carry
// ResponseMeta.latency_budget_exceeded (withBudget, on every believed
// read, from the budget and accepted_at of the call as the replica
// admitted or looked it up: callTools).
//
// The replica that admitted the call also records the overrun, once: its
// results consumer (results.go, onStored; or the recheck that delivers a
// result the consumer could not check) takes the call from the watch
// when its believed result is stored on the call's own subject,
// counts it in toolwire_latency_budget_exceeded_total{tool,source,mode},
// logs it at WARN ("call over its latency budget", with the worker's own
// report of the attempt) and records a LATENCY_BUDGET_EXCEEDED event,
// signed by this replica, on the call's timeline: a core publish the
// events stream captures, not awaited (the consumer's one goroutine must
// not wait on it). That event is stored after the result, so a Watch
// that reaches the result first sends, before FINISHED, the same event
// made from the result's meta; a Watch sends one such event either way.
// At most 65,536 calls are watched at once: the watch keeps the last
// 65,536 admitted, and one more forgets the oldest still watched, in
// constant time (the results consumer waits on the same lock). A call
// forgotten, or whose admitting replica stops before its result, is not
// recorded (its answers still say it went over). A result the consumer
// could not check (a key lookup failed) is measured by the recheck that
// delivers it to its waiter; a submitted call's stays watched until the
// watch forgets it.
//
// # Decisions on request limits
//
// Where the issue that introduced the request limits was silent (the
// bounds of a request body are internal/api's, "Decisions on request
// limits" in its doc.go):
//
//   - MaxArgsValues applies to both argument forms at admission, since
//     arguments_json is a string the body scan cannot see into and the
//     schema check costs time and memory per value. Its default, 2048, is
//     the largest round figure for which the widest arguments it admits,
//     ten at once, were answered within 100ms on a busy 2-core machine;
//     a tool spec cannot raise it (the spec has no such field yet).
//   - The per-caller caps are per replica and kept in memory: shared caps
//     across replicas belong to the rate limits and budgets of the policy
//     design.
package dispatch
