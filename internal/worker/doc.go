// Package worker consumes calls from a pool's durable pull consumer and
// executes them under toolwire's delivery semantics.
//
// # The life of a delivered call
//
// decode → integrity (the caller's tenant is a valid tenant name,
// bus.ValidTenant, and the subject's tenant token is exactly it; the
// subject agrees with the payload) → the tool and its pinned spec version
// are served here (if not, the call is handed back for another replica,
// and refused only on its last delivery: VALIDATION for a version no
// replica ran; a session's pinned version is never swapped for another,
// so the answer suggests clearing the session's pin only when the
// registry's current version, which its next call would pin, is the one
// this worker runs (read from the registry then), and otherwise says
// plainly that no worker runs the version) → what
// admission checked, again,
// since a call can arrive by a raw NATS publish: size and depth limits,
// the arguments against the input schema of the version served (compiled
// once per version, when the worker starts serving it; repeated keys
// refused; registry.CheckArgs, admission's own check), and approval
// (approvals.CheckCall, read by key from the approvals bucket: a call
// that names an approval runs only if that approval is its own, APPROVED,
// bound to exactly this caller, tool, spec version and arguments, not
// expired, and its nonce was consumed by this call; a call that names a
// grant only if the grant exists and covers it; a call of a tool that
// requires approval that names neither never runs — each refused
// CONFIRMATION_REQUIRED and dead-lettered; a bucket that cannot be read
// is read again, see Holding a call) → on a redelivery, or a first
// delivery of a call accepted more than a minute ago (the overdue sweeper
// may have answered it while it waited), an existing result is
// acknowledged without running, and a non-idempotent call
// whose earlier attempt started without a result answers UNKNOWN_OUTCOME
// (both read from the streams' leaders, see below) → the cancel
// tombstone (checked
// after registering for cancellation, so no cancel is missed) →
// schedule-to-start and schedule-to-close deadlines (EXPIRED, never
// executed late) → for a call that names an approval or a grant, the
// policy in force now (The policy check) → attempts, the first one's
// schedule-to-start checked again once its start is recorded (after the
// STARTED claim of a tool that is not safe to rerun, which may be held
// while the events stream does not answer: a call whose start is
// recorded past its deadline is answered EXPIRED and never runs; its
// result's started_at is that moment), each under its
// start-to-close timeout, its tool heartbeat timeout and the call
// deadline, with InProgress heartbeats
// every AckWait/3 (a tool's progress, tool.Progress, and its partial
// output, tool.Partial — bounded there — are PROGRESS events,
// signed like every event, published without waiting for each
// acknowledgement; the attempt's reporter is closed when the attempt
// returns or is abandoned, and publishes nothing after (Partial returns
// tool.ErrPartialClosed); for a call with secret arguments it holds back
// the last (longest secret form − 1) bytes of partial text until the next
// chunk or the close and redacts over the join, numbering the chunks it
// publishes, so that no secret split across chunks is stored in pieces;
// once the attempt
// returns, and the watchdog no longer counts it, the last one's is
// awaited, at most bus.PublishAsyncTimeout, so that whoever finds the
// result finds every progress event stored. The guarantee has limits: a
// publish not acknowledged in that time — one the client re-sends during
// an events stream leader election, say — may be stored after the result,
// or never; an event published without JetStream, because too many
// publishes were pending, is not awaited) →
// redaction of the values of secret arguments (see
// below) → the after-hooks the call names, run by a dispatcher (see
// After-hooks) → the response, cut to the tool's output limits and the inline
// limit with the whole output in the blob store (see Output) → the result
// published with
// ExpectLastSequencePerSubject(0), so the server refuses a second result
// for the same call → ack. Acks therefore only ever settle a call that has
// its one result: a late ack of a stale attempt (nats-server issue 4786)
// cannot lose a call.
//
// # Redaction
//
// The values of the arguments a tool's input schema marks secret
// (internal/redact) never leave the worker in clear: each executor is
// wrapped (inside the telemetry decorator) so that an attempt's result
// and error are redacted before spans, RETRYING events, logs or responses
// see them, and every sink redacts what it writes whatever built it — the
// response before it is stored (inline or in the blob store), refusals
// (before their log line and term reason), dead letters' reasons and
// errors, events and the worker's log lines about a call. A tool without
// secret fields pays one substring search of its schema per layer.
// Stored in clear: the call itself, as the calls and retries streams and
// dead letters keep it to run it.
//
// # After-hooks
//
// A call whose attempt ran and that names after-hooks (admission binds
// them from the policy, docs/policy.md "Hooks") has its terminal response
// looked at before it is stored (afterhooks.go). DESIGN §6 puts them
// before the redaction; they run after it here, so that a hook — perhaps
// a third party's webhook — never sees a secret argument's value. They
// run before the output is cut, so they see all of it and nothing they
// redact reaches the blob store. Hooks are tools, and a worker's
// credentials may not publish calls, so the worker sends the response to
// bus.AfterHookSubject, where the dispatchers (one queue group) call the
// hooks through the fleet and answer what they made of it; a busy or
// absent dispatcher is asked again (100 ms doubling to 2 s) within the
// hooks' timeouts plus a second each and 5 s. Past that every hook has
// failed: the response is stored unchanged if every hook fails open, and
// withheld (INTERNAL, no content, intents dropped) otherwise. The worker
// applies the reply itself: a failed call keeps its error and outcome
// whatever the hooks answered. The delivery's heartbeats go on while it
// waits.
//
// # Output
//
// A tool's limits.max_output_bytes and max_output_lines bound its output
// text inline (package output: the text blocks joined by newlines, or the
// structured JSON when there is no text block), the marker line included;
// Config.MaxInlineBytes bounds the encoded response. A response over
// either is published cut (fitInline): the text blocks keep their order,
// annotations and `_meta`; the block across the cut is shortened at a
// character and the blocks beyond it left out, as are other blocks beyond
// it; one marker line says how much is shown and the toolctl output
// command that reads the rest, at the end (head) or at the start (tail,
// limits.truncate TAIL); structured JSON longer than the byte limit is
// left out (it cannot be cut and stay JSON); meta.truncated is set. The
// whole (redacted) response goes to the blob store as
// "<call_id>.<attempt>.response.pb" (meta.full_output) and its output
// text as "<call_id>.<attempt>.output.txt" (meta.full_text), which the
// dispatcher's GetOutput serves. Decisions where the issue was silent:
// the limits count the output text, not other blocks (an image is kept
// whole while the encoded response fits, else left out with the rest);
// the marker counts toward the limits (a byte limit below the marker keeps
// a shortened marker only); a head cut ends without its newline (the
// marker's takes its place) and offers --offset at the cut; when the cut
// response still passes the inline limit, it keeps half the inline limit
// of text and nothing else.
//
// # Retries
//
// Retryable errors run again in-process with exponential backoff and
// jitter (cenkalti/backoff), bounded by the tool's RetryPolicy (defaults:
// 3 attempts, 200ms initial, ×2, 30s max, 20% jitter) and the call deadline
// — only when the tool is read-only or idempotent, or the error reports no
// partial side effects. RATE_LIMIT waits its retry_after without spending
// an attempt. A delay above MaxInProcessDelay parks the call as a message
// schedule in the retries stream and acks it, so it holds no consumer slot
// while it waits; the dispatchers' mover puts it back on the calls stream,
// and the worker that takes it treats it like a redelivery (the call
// carries the attempt it reached). Exhausted attempts answer MAX_ATTEMPTS with a dead letter.
// Attempts are numbered on from the last one an earlier delivery recorded
// or a parked call carried. An answer names the last attempt this
// delivery took (its STARTED claimed it, or it ran), never the try under
// way before its claim; an answer given before the first (refused,
// cancelled or expired before it started, UNKNOWN_OUTCOME, a policy
// denial) names attempt 0, which nothing claims: JetStream's delivery
// count, or the attempt after the last one read, may be an attempt
// another delivery claimed (a parked call is delivered from 1 again; an
// earlier worker may still be running), and a result of a pool's key for
// an attempt another key claimed is not believed (internal/believed).
// Crashes are retried by redelivery up to the pool's MaxDeliver; a call
// whose every delivery crashed is ended by the dispatchers' reaper from the
// server's MaxDeliver advisory. Attempts of tools that are not safe to rerun
// record their STARTED event durably before running, which is how a
// redelivery knows the outcome is unknown. A delivery that cannot reach
// the streams spends no delivery: it holds the call (next section).
//
// # Holding a call
//
// A delivery whose server steps fail — the lookups of a redelivery (the
// result, the last attempt event), the cancel tombstone, the approval
// record, the policy in force, the STARTED event and its read-back, the
// result — keeps its message instead of handing it back: a nak would
// spend one of the deliveries the pool's MaxDeliver allows (during a
// partition, calls spent all of theirs on failed lookups and were dropped). Its
// heartbeats (InProgress every AckWait/3) go on, as during an execution,
// and the step is tried again after 250 ms, doubling to 5 s (hold.go),
// until it succeeds; until the call's schedule-to-close deadline passes,
// which is answered as any expiry (EXPIRED when no attempt ever ran, a
// TIMEOUT with side effects UNKNOWN when the delivery could not look up
// what earlier ones did); or until the worker's grace period ends, when
// the call is handed back as at shutdown. A caller's cancel does not end
// the wait: its answer needs what the step reads. A held result is
// published for at least 30 s (an election on RESULTS took up to 11.5 s
// in the fault tests) and beyond that until the call's deadline, since a
// result stored late is still its true answer. Stats.Held counts the
// steps tried again.
//
// When the worker's own connection is cut, its heartbeats are lost too:
// AckWait passes and JetStream hands the call to another worker, as after
// a crash. The held delivery is then stale, but acts only on what it
// reads once the server answers again, and runs a tool that is not safe
// to rerun only on a STARTED claim checked against every other
// delivery's (below). A pool consumer's new leader also redelivers the
// calls delivered more than AckWait before, held or not (the heartbeats
// sent while it had no leader are lost). A redelivery that finds an
// earlier delivery of its call in flight in the same worker (not an
// execution the watchdog abandoned) leaves the call to it unsettled: that
// delivery settles the message, and may be publishing the tool's result,
// which an UNKNOWN_OUTCOME (or a second run) would pre-empt. A redelivery
// that finds an attempt another worker started (or reported progress on)
// without a result cannot see that worker: until the attempt's event
// time plus 30 s plus AckWait (never past the call's deadline) it holds
// the call and looks for the result every second or so, and acknowledges
// the one that worker stores (Stats.Awaited); only then, the attempt
// event read again, is it answered UNKNOWN_OUTCOME. A worker that
// crashed mid-attempt therefore has its call answered about 30 s later
// than AckWait alone would.
//
// # No durable record, no step that needs it
//
// A tool that is neither read-only nor idempotent runs only once its
// attempt's STARTED event is stored. While the events stream does not
// acknowledge it (an error, or no answer within 10s: a cluster electing
// a leader, a full stream), nothing runs and the delivery holds the call
// (Holding a call). The STARTED carries a message id of its own, so a
// publish tried again after a lost acknowledgement is deduplicated, and
// a copy stored beyond the duplicate window is known as the delivery's
// own when the events are read back. Past the call's deadline the call
// is answered as expired (never executed, if no attempt ran). At
// shutdown it is handed back (Nak, counted in Stats.NotStarted, not as a
// failed attempt; on the last delivery MaxDeliver allows it ends with
// MAX_ATTEMPTS, side effects NONE, and a dead letter) after a RETRYING
// event with side effects NONE, tried with backoff for 2s: a STARTED
// stored without its acknowledgement reaching the worker would otherwise
// make the next delivery answer UNKNOWN_OUTCOME (the safe side, never a
// second run). The same note is stored when a shutdown reaches an
// attempt whose STARTED this delivery stored and claimed before it ran:
// every path that leaves a claimed attempt unrun says so durably, so the
// next delivery runs it.
//
// The same holds for the other records a later decision reads. A RETRYING
// event is what lets the delivery of a call parked for a long retry delay
// run it again; when it is not stored, the retry waits in-process instead
// (the next attempt's STARTED supersedes the last one). The RETRYING event
// of a call whose attempt a shutdown interrupted while it ran is tried
// once: without it the redelivery reads the attempt's STARTED and answers
// UNKNOWN_OUTCOME (the attempt did run). A redelivery reads the stored
// result and the last attempt event from the streams' leaders
// (bus.LastMsgFromLeader: a replica that lags would answer "none"), and a
// scan of a call's events that ends before the number of events the
// leader counts is an error: on any error the delivery holds the call and
// reads again, never runs it on a guess.
//
// Two deliveries of one call can both look and find no earlier attempt: a
// worker that stalls past AckWait before its STARTED is stored (a GC
// pause, SIGSTOP, a leader election on EVENTS) and the redelivery that
// JetStream hands another worker meanwhile. So, for a tool that is not
// safe to rerun, a stored STARTED is a claim that is checked before the
// attempt runs: the worker reads back, from the leader, the call's events
// stored before its STARTED, and if another delivery recorded the same or
// a later attempt first it neither runs nor settles (Stats.ClaimsLost):
// its delivery is stale, or, if not, the next one reads the winner's
// STARTED. The read starts after the delivery's own previous STARTED (an
// in-process retry); each read gets 2s, and while the events cannot be
// read back the delivery holds the call and reads again, then runs the
// attempt if the claim is its own. Only when the worker's grace period
// ends first is the delivery left unsettled, without the RETRYING note,
// since another delivery may be running the attempt (a nak, even a stale
// one, would hand the call to a third worker meanwhile): its next
// delivery, after AckWait, answers UNKNOWN_OUTCOME. When the call's
// deadline passes first it is answered TIMEOUT, side effects UNKNOWN:
// this delivery did not run it, another may have. A cancel request (a
// CANCEL_REQUESTED, believed only from a dispatcher) read back among
// those events wins over the STARTED too (errCancelledFirst): the attempt
// does not run and the call is answered CANCELLED, side effects NONE. A
// dispatcher records a cancel request on the call's events subject (the
// admitting replica's, which the worker reads back) before it answers a
// call no attempt of which started (internal/dispatch: settleCancelled),
// so a worker that missed the tombstone never runs a call its caller was
// told is CANCELLED with effects NONE; the worker's own answer then meets
// the dispatcher's stored one and keeps it (keepStored).
//
// UNKNOWN_OUTCOME says what is known: the attempt, when it started (or
// last reported progress, or was interrupted) and on which worker, that
// no end or result was recorded, and that it may still be running or
// have run.
//
// One window remains: a STARTED stored without its acknowledgement
// reaching the worker is followed by the RETRYING note above; if, in the
// same moment, the delivery is stale and another worker's STARTED for
// the same attempt was stored before it, the note lets a later delivery
// run the next attempt while that worker may still run this one. It needs
// a lost publish acknowledgement and a delivery stalled past AckWait
// together; the fault tests have not produced it.
//
// A result the worker holds is published again with backoff (each try
// bounded by 10 s, the call held meanwhile) for at least 30 s and until
// the call's deadline, before the call is handed back for a redelivery:
// a results stream electing a new leader after a node failed does not
// turn a computed result into an UNKNOWN_OUTCOME (settle.go,
// resultHold). A try that finds a result stored ends it: this
// delivery's own, stored by a try whose acknowledgement was lost, or
// another's (a stale delivery's, a dispatcher's answer to an overdue
// call); either is kept, and the log says which.
//
// # The policy check
//
// Deny wins at every moment, also over a person's decision taken under
// an older policy (docs/policy.md, "Guarantees"). A call that names an
// approval or a grant — approved, redeemed or admitted under the policy
// in force then — is decided again right before its attempts
// (policycheck.go; after the approval check, the lookups of a
// redelivery, the cancel tombstone and the deadlines, so a redelivery
// that has its result or whose earlier attempt's outcome is unknown is
// answered as such): the policy in force for the call's tenant now
// (its own document, else the installation's), read from the policies
// bucket's leader (policystore.Reader: one or two reads by key; each
// document parsed, its CEL compiled, once per version and kept), decides
// the call as the dispatcher's re-check on approve does (the tool spec
// served, the arguments, the caller; no approval or grant, since none
// turns a deny into an allow). Only the deny decision is taken: no ask,
// no limit, no hook, which were admission's. A deny — a deny rule, or a
// layer whose default is deny — is answered PERMISSION_DENIED naming the
// rule's reason, the policy version and the rule's id (side effects as
// an earlier attempt may have left them: NONE when none ran),
// dead-lettered and terminated, never run; Stats.PolicyRefusals counts them. This closes
// the window between an approval (or a grant's admission) and the run: a
// call queued behind others, redelivered after a crash, or waiting for a
// pool without workers while a deny rule is applied.
//
// Reading from the leader, rather than holding the documents through a
// watch as dispatchers do, sees every apply that has returned, with no
// propagation lag, and needs no consumer on the bucket (a worker's
// credentials may create none there: internal/bus, "Permissions"). A
// read from the leader is a STREAM.MSG.GET, whose request body (the key,
// or a sequence) permissions cannot see: a worker credential can read any
// message of the policies bucket, every tenant's documents and in-force
// records with their history — rules and who applied them, no secret
// (hooks are tools named by the rules; their configuration is in the
// registry). It writes nothing there. The cost is a round trip or two
// per call that carries an approval or a grant, next to the approval
// check's own reads. Calls that carry neither are not decided again: the
// rules decided them at admission, and a read per call would cost every
// call of the hot path a round trip; a plain call queued before a deny
// rule still runs. A policy that cannot be read (no leader, no answer) or
// loaded (a record that does not decode, a document missing or that does
// not parse: policystore.ErrUnavailable) fails closed: the delivery holds
// the call and reads again, as any lookup (Holding a call), logged at warn
// once ("policy lookup failed; holding the call"), until it is read, the
// call's deadline passes (EXPIRED) or the worker stops (handed back).
// Applying the document again repairs a missing one.
//
// # Refused calls
//
// A call that fails the checks above is answered (an error response,
// VALIDATION, NOT_FOUND, CONFIRMATION_REQUIRED or PERMISSION_DENIED, not
// retryable, side effects NONE), dead-lettered and terminated. Two are not answered: a
// call whose subject names another tenant than its payload, and a call
// whose tenant is no valid name (never mapped to a token: a.b would be
// answered as a_b). They are dead-lettered (VALIDATION; the second raw,
// under tenant _unknown) and terminated.
//
// # Cancellation
//
// The call's context is cancelled with a cause: CancelledError (the caller,
// via the tombstone watched on one core subscription), ErrShutdown, a
// deadline or a missed tool heartbeat. The answer is CANCELLED with
// partial_side_effects from the tool, NONE for read-only tools or before
// start, UNKNOWN otherwise; the response records who cancelled and why.
// A call cancelled while queued is usually answered by the dispatcher at
// cancel time already; the worker that takes it later finds the
// tombstone (or the cancel request, when it reads back its STARTED),
// does not run it, and keeps that stored answer.
//
// # Watchdog
//
// An attempt runs on its handler's goroutine (no goroutine of its own, no
// hand-off: a measurable share of a fast call). One watchdog goroutine per
// worker visits the running attempts every Watchdog/4; an execution that
// ignores its ended context for Watchdog (at most 1.5×Watchdog) is
// abandoned: logged, counted (Stats), its heartbeats stopped, its slot in
// the pool freed, and the message left unsettled so JetStream redelivers
// it after AckWait. Its handler, when the execution finally returns,
// leaves the call alone.
//
// Handlers run on long-lived goroutines (runners) that keep the stacks
// earlier calls grew: a fresh goroutine per call grows and copies its
// stack on every call.
//
// # What a worker publishes
//
// Start (and Ensure) publishes exactly the tools of the pools the worker
// serves, after creating or extending those pools' consumers: a spec of
// an executor type none of its pools runs, or two specs of one name, stop
// the start-up with an error, since such a tool would be registered with
// nobody to run its calls (admitted, then PENDING for good) or would
// replace another silently. Each name is claimed for the worker's pool in
// the registry first (registry.Claim, claims.go): a name another pool
// defines differently is refused, naming both pools. Shadow workers claim
// nothing. The worker writes nothing into the registry itself and creates
// no consumer: claims, specs and its pools' consumers are announcements
// (registry.PoolWriter; the consumer: registry.OpEnsure, after the
// claims, before the specs) to Config.Registry, by default a
// registry.Remote that asks the dispatchers on the pool's subject
// (bus.PoolRegistrySubject), which check them and write them or run
// bus.EnsurePool; a refusal (registry.ErrRefused, registry.ErrClaimed)
// stops the start-up. One claim refusal is waited out instead: a tool
// whose holder's consumer is gone but not yet for registry.ClaimGrace
// (the refusal's Holder.MissingSince) is claimed once more when that
// period has passed, plus a second and up to a second of jitter (at most
// the grace period and two seconds; logged; the worker not ready
// meanwhile; ctx ends the wait), so that a pool taking over a retired
// pool's tools starts (claimAgain, claims.go). The worker then looks its
// consumer up by name.
//
// # Pool consumers put back
//
// A served pool's consumer is what the worker declared (EnsurePool, run by
// a dispatcher at the worker's request, from the pool's settings and its
// tools' subjects), stamped in the consumer's
// metadata (bus.PoolStampKey: a hash of every setting but the name and
// filters; bus.PoolByKey: the declaring build). Every ConsumerCheck
// (default 5s), and at once when a fetch finds the consumer gone, the
// worker checks the live consumer (bus.CheckPool, guard.go):
//
//   - missing, or changed by hand — settings that no longer hash to the
//     consumer's own stamp (an edit that kept the stamp, or dropped it),
//     or a declared filter missing (never one more: another replica's
//     tools add filters): put back with EnsurePool, logged at warn with
//     what differed. Ready — the worker's /readyz — fails meanwhile,
//     naming the difference. A pool's pause is checked against its
//     record instead (bus.PausePool: the pause an administrator made
//     through toolwire, with who and why): a pause without a record, or a
//     record without its pause (nats consumer pause or resume with the
//     operator credential), is such a change, and putting it back makes
//     the pause match the record; a recorded pause is no change.
//   - another replica's whole declaration (settings that hash to their
//     stamp, not this worker's: a rolling upgrade that changes AckWait or
//     MaxDeliver): left as it is, logged at warn once per declaration
//     ("pool consumer holds another worker's declaration; left as it
//     is", with declared_by and how it differs), and Ready does not fail:
//     the consumer is whole and serves this worker's calls, and an older
//     replica must stay ready until the rollout replaces it. Before,
//     replicas with different settings put back each other's every check,
//     for ever. The newest EnsurePool wins: a replica that starts, or
//     serves changed specs, writes its own declaration.
//
// A repair that fails (an overlapping pool's consumer in the way, a
// setting the server cannot update, such as a deliver policy) is logged
// at error and tried again at the next check; the worker stays not ready.
// A re-created consumer starts at new calls (DeliverNew): calls queued
// while it was missing are the orphan sweeper's (dead-lettered). The
// checks run outside the worker's lock, so Ready and a spec refresh never
// wait on them; a repair takes the lock (it must not interleave with the
// specs being served again, which change the pool's subjects).
//
// # Flow control
//
// A pool fetches at most its free slots (Concurrency minus calls in
// flight), so no call waits in a client buffer while its AckWait runs, and
// a pull request is never abandoned (a stop waits for it to end).
//
// # Shutdown
//
// Stop ends fetching, lets in-flight calls finish while their heartbeats
// continue (a call held while a server step fails goes on trying), and
// when its context ends cancels the rest with ErrShutdown and Naks them
// without delay (a held lookup: after a second): a call interrupted by shutdown is handed back,
// not failed (JetStream still counts that delivery toward MaxDeliver; on
// the last delivery it ends with MAX_ATTEMPTS instead). It then stops the
// worker's own goroutines and waits for them. Stop returns nil once every
// goroutine the worker owns has ended — a call handed back at the end of
// the grace period is no error — and its context's error when it gave up
// on executions the watchdog abandoned (tools that ignore their context:
// they end when the tool returns). Stop is idempotent and may be called
// concurrently; a later call waits again, with its own context, for what
// still runs.
//
// # Structured output
//
// A sandbox, HTTP or MCP tool's structured output is checked against the
// tool's output_schema_json before it is answered (outputcheck.go): a
// mismatch is answered PERMANENT with the violations (path and what the
// schema wanted; at most five named in the message) and side effects
// POSSIBLE, never retried — the tool ran and would print the same again;
// a spec with output_schema_advisory passes it with a WARN log that names
// only the paths (a schema's message may quote a value). A result without
// structured output, and a native tool's (encoded from the Go type its
// schema is derived from), are not checked. The check is of what the executor
// returned, before after-hooks (a hook's replacement is not checked) and
// after the executor removed what is not output (an HTTP body's
// redactions, a sandbox tool's intents_field), so a schema should not
// require those. The answer carries at most five violations, each cut to
// 200 bytes; the paths are redacted like values.
//
// # Where the code is
//
// handle.go is the life of a delivered call, top to bottom: a delivery
// value per delivered message holds what every step needs (the message,
// the call, the spec served, the pool, its slot, the timing of the
// attempt), and its methods are the steps — decode, precheck, register,
// recheck, gate, checkPolicy, attempt, decide. Each step either leaves the call to the
// next one or decides an outcome, which settle.go carries out: ack (after
// publishing the answer), nak, hand back, term or a retry schedule.
// retry.go runs the attempts under the retry policy; execute.go runs one
// attempt under its timeouts; response.go builds the answers with
// internal/envelope. Around the path: hold.go (holding a call while a
// server step fails), events.go (attempt events), claim.go (the STARTED
// claim, and the attempts left unrun), cancel.go (tombstones, and the registrations of running
// calls), watchdog.go, heartbeat.go, runners.go, truncate.go (Output),
// redact.go, outputcheck.go (Structured output), policycheck.go (The policy check), observe.go (metrics and spans), guard.go (pool consumers
// put back), decode.go (the checks;
// the arguments' is registry.CheckArgs), and worker.go (start, fetch, stop).
package worker
