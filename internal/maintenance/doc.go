// Package maintenance holds the dispatcher's background services, the
// work no caller asks for that keeps calls from hanging for good (River's
// internal/maintenance is the model): the reaper, the retry mover, the
// dead-letter retry service and the orphan sweeper. Each is a
// startstop.Service; the dispatcher (internal/dispatch, lifecycle.go)
// starts them in its Group and stops them with it. They read and write
// JetStream only, through the bus (internal/bus), and need nothing of the
// dispatcher core: the answers they publish reach waiting callers through
// the stored results every replica follows. The answers themselves are
// built by internal/envelope.
//
// Every service takes a Config (the bus, the replica's name, the logger);
// its constructor fills in the defaults and its Start refuses a
// configuration that does not Validate. Every replica runs every service:
// message ids and the result fence below make that harmless.
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
// bus.EnsureReaper and bus.EnsureMover). The reaper reads the server's
// MaxDeliver advisories captured in the advisories stream: a call whose
// every delivery crashed or stalled and that has no result gets a dead
// letter (message id reap-<stream sequence>, so a retry does not
// duplicate it) and a terminal MAX_ATTEMPTS response (source "dlq", side
// effects UNKNOWN) published with ExpectLastSequencePerSubject(0), so it
// never replaces a result; no caller waits forever. The mover reads due
// retries from the retries stream (calls a worker parked there for a long
// retry delay) and puts each back on its calls subject with the message
// id <call_id>-r<attempt> and the trace context the worker wrote. It
// first checks that the due retry retries a stored call: the schedule
// names the calls stream sequence of the delivery it retries
// (bus.RetryOfHeader), and the call stored there must equal it in every
// field but the attempt. Anything else is dropped with an error log:
// worker credentials may write retry schedules, and a schedule must not
// queue a call admission never saw. Each message is handled within 10s;
// both retry a failed message after 1s.
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
package maintenance
