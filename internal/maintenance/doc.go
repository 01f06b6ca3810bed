// Package maintenance holds the dispatcher's background services, the
// work no caller asks for that keeps calls from hanging for good (River's
// internal/maintenance is the model): the reaper, the retry mover, the
// dead-letter retry service, the orphan sweeper and the overdue sweeper.
// Together they keep one promise: no accepted call is ever left without
// an answer. Each is a
// startstop.Service; the dispatcher (internal/dispatch, lifecycle.go)
// starts them in its Group and stops them with it. They read and write
// JetStream only, through the bus (internal/bus), and need nothing of the
// dispatcher core: the answers they publish reach waiting callers through
// the stored results every replica follows. The answers themselves are
// built by internal/envelope.
//
// Every service takes a Config (the bus, the replica's name, the logger,
// the retry delays); its constructor fills in the defaults and its Start
// refuses a configuration that does not Validate. Every replica runs
// every service: message ids and the result fence below make that
// harmless.
//
// # Failures that may pass are retried, never dropped
//
// What a service could not handle for a reason that may pass — a lookup
// or a publish that failed or timed out, a stream with no leader, a
// partition — is tried again after Config.RetryDelay (1s), doubling with
// each failure of the same item up to Config.MaxRetryDelay (30s), for as
// long as it takes: the shared consumers have no MaxDeliver (-1) and a
// message is never terminated, the overdue sweeper puts a call it could
// not look at back in its heap. An item is dropped only when no later try
// could do better (an advisory that is not JSON, a call the calls
// stream's leader no longer holds, a due retry that retries no stored
// call). Before, the reaper's consumer delivered an advisory at most 10
// times, 1s apart: during a partition every attempt timed out and the
// advisory was dropped, leaving its call PENDING for good.
//
// # Answers and dead letters
//
// A call a service ends gets a dead letter on the DLQ stream, published
// with a message id derived from the stream sequence of what it ends, so
// a repeat within the DLQ stream's duplicate window (2m) records nothing
// new, and, when the call can be answered safely, a terminal answer
// (source "dlq") published on its result subject with
// ExpectLastSequencePerSubject(0), so it never replaces a result. A call
// is answered only when its payload decodes and its tenant is a valid
// name that is exactly the tenant token of the subject it was stored on:
// otherwise the answer would land in a tenant's results on a stranger's
// word, and the message is dead-lettered raw under tenant _unknown.
//
// # Reaper and retry mover
//
// The Reaper and the Mover each consume a durable consumer that every
// replica shares, so each message is handled once (made by
// bus.EnsureReaper and bus.EnsureMover, both MaxDeliver -1). The reaper
// reads the server's MaxDeliver advisories captured in the advisories
// stream: a call whose every delivery crashed or stalled and that has no
// result gets a dead letter (message id reap-<stream sequence>, so a
// retry does not duplicate it) and a terminal MAX_ATTEMPTS response
// (source "dlq", side effects UNKNOWN) published with
// ExpectLastSequencePerSubject(0), so it never replaces a result. A call
// the calls stream no longer holds is taken as aged out only when the
// stream's leader says so (its first sequence is past it): a replica that
// lags answers a direct get "not found" too. The mover reads due
// retries from the retries stream (calls a worker parked there for a long
// retry delay) and puts each back on its calls subject with the message
// id <call_id>-r<attempt> and the trace context the worker wrote. It
// first checks that the due retry retries a stored call: the schedule
// names the calls stream sequence of the delivery it retries
// (bus.RetryOfHeader), and the call stored there must equal it in every
// field but the attempt. Anything else is dropped with an error log:
// worker credentials may write retry schedules, and a schedule must not
// queue a call admission never saw. Each message is handled within 10s;
// a failed one is retried as said above.
//
// # Dead-letter retries
//
// DLQRetries serves `toolctl dlq retry` (dlq.ServeRetries, one queue
// group of every replica): an operator's NATS credentials may not publish
// calls, so the operator asks a dispatcher, which republishes the dead
// call as a new call (see internal/dlq). Stop unsubscribes and waits for
// the last request's callback.
//
// # Orphan sweeper
//
// A call on a subject no pool consumer filters would never be delivered:
// admission refuses calls no pool consumes (the dispatcher's pool check,
// which reads the same Coverage), but a raw NATS publish (an unknown
// executor type, a tool no pool serves) or a deleted pool leaves such
// calls behind. Every SweeperConfig.Every (the dispatcher's
// Config.OrphanSweep: 1m; negative = never; the first sweep comes after
// half to one period, so replicas started together do not sweep in step)
// the Sweeper lists the calls stream's subjects (one stream info request,
// paged), keeps those that no pool consumer's filter matches (consumers
// named <prefix>_pool_*; audits and watchers deliver to no worker), and
// ends every call on them stored more than SweeperConfig.Grace
// (Config.OrphanGrace, 1m) ago, at most 1000 per sweep: a dead letter
// (message id orphan-<stream sequence>) and a NOT_FOUND answer (source
// "dlq", side effects NONE: nothing ran) published with
// ExpectLastSequencePerSubject(0), unless the call has a result already. A
// message that is not a call, names a tenant that is no valid name, or
// whose subject names another tenant than its payload cannot be answered
// safely: it is dead-lettered raw under tenant _unknown. Every replica
// sweeps; the message id and the result fence make that harmless. What a
// replica has swept is kept in memory: after a restart an answered call
// is recognised by its result, but an unanswerable one older than the DLQ
// stream's duplicate window (2m) is dead-lettered again. A subject that a
// pool starts to filter only after calls arrived on it is not swept (the
// pool, created with DeliverNew, will not deliver them either).
//
// # Overdue sweeper
//
// The reaper answers a call whose deliveries ran out, but only if its
// advisory was captured; nothing answered a call whose message never
// reached the calls stream (a publish the dispatcher answered
// accepted-but-unconfirmed, then crashed), whose pool consumer dropped it,
// or whose advisory was lost. The OverdueSweeper answers any accepted call
// whose result is overdue, whatever happened to its messages.
//
// What it follows. Every replica follows, with two ordered consumers (no
// acks, one replica, made again by the client from the next sequence
// after a failure), the events stream, keeping the ACCEPTED records (the
// admission record every queued call gets: dispatch publishAccepted, also
// for an approved call and a dead-letter retry), and the results stream
// (whole messages: a result's signature covers its payload, so a
// result's headers alone cannot show it is believed). Both start OverdueSettings.Lookback (1h) before the
// sweeper started, so a restart (of every replica) loses nothing admitted
// within it; while the streams cannot be read, following is tried again.
// The consumers are named <prefix>_overdue_<random>_<n>
// (OverdueConsumerPrefix) and deleted on Stop.
// A record is followed only when its subject
// <prefix>.event.<tenant>.<dispatcher>.<call_id> names exactly its tenant
// (a valid name) and call id: an answer lands in that tenant's results,
// never on a stranger's word. A call with a believed result on any
// dispatcher's subject is answered already; one without is answered on
// the result subject of the dispatcher its record's subject names: the
// call's own (ToolCall.dispatcher), where its workers, its approval and
// its waiting caller put and look for its result — an approved call's
// record too, which its approver stores on that subject. A call is due at its schedule-to-close
// deadline (the record carries the call's deadline and spec version) plus
// OverdueSettings.Grace (1m: clock skew, a worker's lookups between its
// deadline check and the attempt's start, and the worker's own TIMEOUT or
// EXPIRED answer, which is better than ours); a call without a deadline
// at its admission plus OverdueSettings.NoDeadline (1h; negative = such
// calls are not followed). Each replica adds up to Grace/8 (at most 5s)
// at random, so that one usually answers and the others find its answer.
// The calls are kept in a min-heap by due time, at most
// OverdueSettings.MaxTracked (100,000, about 300 bytes each); records
// beyond it are dropped, counted (OverdueStats.Dropped) and logged at 1,
// 10, 100, … drops. A believed result of a followed call drops it (the
// signature is checked against the tool's pool); a result read before
// the call's record (the two consumers need not keep step) is
// remembered, unchecked, the last 4096 of them, and a record that comes
// while its result is remembered is looked at at once: dropped if the
// result is believed, else followed until it falls due. Results are only
// an economy: the look decides. Without them every call would be
// followed until it falls due, an hour for a call without a deadline:
// past about 28 calls a second MaxTracked would fill, and records be
// dropped.
//
// The look. When a call is due, the sweeper reads from the streams'
// leaders (bus.LastMsgFromLeader, bus.AllMsgsFromLeader, as a worker
// does) the call's result, then its events. A result, or a REJECTED
// record (the admission refused the call and the caller was told so),
// ends it. Otherwise the call is answered with what can be shown:
//
//   - An attempt may have run (a STARTED or PROGRESS event last, or a
//     RETRYING whose error's side effects are not NONE): UNKNOWN_OUTCOME,
//     side effects UNKNOWN, naming the attempt, its worker and its start.
//   - The call has a deadline, and the spec version admitted (read from
//     the registry) is neither read-only nor idempotent: such a tool's
//     attempts store STARTED before they run, and a worker never starts a
//     call past its schedule-to-close deadline (worker gate: EXPIRED), so
//     the events show all that ran or ever will. No attempt: EXPIRED,
//     side effects NONE, never executed. The last attempt failed without
//     effects: TIMEOUT, side effects NONE.
//   - Otherwise nothing more can be shown: a read-only or idempotent
//     tool's attempt shorter than 100ms records no STARTED, the spec may
//     be unknown, and a call without a deadline may still be queued and
//     run. UNKNOWN_OUTCOME, side effects UNKNOWN (NONE for a read-only
//     tool), saying why.
//
// The answer (envelope.DeadLettered, source "dlq") is published with
// ExpectLastSequencePerSubject(0), after a dead letter with message id
// overdue-<call_id> on <prefix>.dlq.unknown.<tenant>._unknown.<tool>
// holding the admission record raw: the sweeper never holds the call
// itself (it may never have been stored), so `toolctl dlq retry` does not
// retry it. A result a worker stores later is refused by the fence: the
// caller keeps the sweeper's answer, which said that it may still come.
// And a call still queued when it was answered does not run afterwards: a
// worker's first delivery of a call accepted more than a minute ago looks
// for a stored result before it runs, as a redelivery does (worker
// doc.go), so only an attempt already under way when the answer was
// stored can still run, as the answer says.
// A look that fails (10s each) is tried again as above.
//
// What it does not cover: a call waited on with Call whose dispatcher
// crashed within Config.AcceptedRecordDelay (50ms) of its publish has no
// admission record, and neither caller nor record knows its id; it runs
// if its message was stored (and is reaped if its deliveries run out).
// Each replica reads every event of the installation (the cost of
// following), and on start those of the lookback; the looks are
// sequential, a few leader reads each.
package maintenance
