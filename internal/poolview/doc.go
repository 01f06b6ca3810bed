// Package poolview is admission's cached view of the worker pools: Load,
// the pools' backlogs and drain rates and the stores' use, which the
// dispatcher's overload step checks a call against (OVERLOADED), and
// Pools, the pool consumers' filters, which its pool step checks that
// some pool serves a call against (NOT_FOUND). Each is a model read
// lock-free on the hot path and a background refresh (a
// startstop.Service); neither knows admission. The dispatcher
// (internal/dispatch, admit_overload.go and admit_pool.go) calls them; this
// package does not import it.
//
// # Overload
//
// An admitted call (Submit and Call alike) is checked against the load it
// would add (Load.Check) by the dispatcher's overload step, after its
// idempotency key is claimed (a repeat of an accepted call still answers
// that call) and before it is published. A call with a key is asked
// about first, before the claim (Load.Peek: Check's answer, counting
// nothing, waiting for a fresh read as Check does), so that a refusal of
// a keyed call writes nothing: no key, no REJECTED event, no release;
// Check after the claim still decides, and its rare refusal (calls
// admitted in between) releases the key. It is refused OVERLOADED —
// retryable, side effects NONE, a retry_after, nothing queued — when:
//
//   - a store the call may write and that refuses writes when full is past
//     LoadConfig.StoreHighWater (90%; the dispatcher's
//     Config.StoreHighWater) of its byte limit: calls for every call,
//     idempotency for calls with a key (Request.Keyed), and the JetStream
//     account's storage when the account has a limit (bus.Store.Use).
//     Discard-old stores (results, events, retries) never refuse a call:
//     they drop their oldest messages (refusing until those aged out
//     would refuse every call for days); blobs are optional copies. The
//     message names the store, its use and its limit; retry_after 30s.
//     The 10% left is for the calls already admitted: their results,
//     events, retries and outputs must never be what fails. The
//     dispatcher asks this part alone (Load.CheckStores) for a keyed call
//     that is parked for an approver rather than published; a write a
//     store refused outright because it filled between two reads (the
//     idempotency bucket's claim, the calls stream's publish) is answered
//     with FullRefusal (OVERLOADED, retry_after 30s), never an error.
//   - its pool's backlog is at the pool's bound: the calls queued and
//     running, NumPending + NumAckPending of the pool consumer (not
//     NumWaiting, which counts idle workers' pull requests). The bound is
//     LoadConfig.MaxBacklog (10,000) or the pool's
//     LoadConfig.PoolMaxBacklog (the dispatcher's Config.MaxBacklog and
//     PoolMaxBacklog); retry_after is the time the pool needs to work off
//     the excess at its drain rate (at least 1s, at most 1m).
//   - its pool would start it too late: the expected wait is the pool's
//     queued calls (NumPending and what this replica admitted since) over
//     its drain rate (below: conservative, it falls as fast as the pool
//     slows). A call with a schedule-to-start (Request.ScheduleToStart) is
//     refused when the wait is past 90% of it or past it less one
//     refresh interval, whichever is shorter (but never below half of
//     it): the rest is headroom for the estimate's error and for a view
//     up to a refresh interval old, so that an accepted call starts in
//     time. A call without one is refused when the wait is past its
//     pool's bound on queue wait (below), so that overload is refused
//     fast with no configuration: before, only the backlog bound refused
//     such calls, at 10,000 calls, minutes of queue. retry_after is the
//     excess. Without a drain rate measured yet (no call finished), this
//     check does not refuse.
//
// A pool's bound on queue wait, for calls without a schedule-to-start,
// is by default the larger of LoadConfig.MaxQueueWait (2s; the
// dispatcher's Config.MaxQueueWait, --max-queue-wait; negative = no
// bound) and QueueWaitRounds (3) times the pool's typical call time;
// LoadConfig.PoolMaxQueueWait (the dispatcher's Config.PoolMaxQueueWait,
// --pool-max-queue-wait sandbox=2m; negative = none) gives a pool a
// bound of its own in its place, which does not scale. Why it scales: a
// fixed 2s is the right default for a fast pool (8 slots running 20ms
// calls work off 2s of queue, 800 calls, in 2s, and latency recovers
// within about twice that once an overload ends), but a pool of slow
// tools (LLM-backed tools, sandboxes: 8 slots running 30s calls drain
// 0.27 calls a second) would refuse almost any call that queues at all
// (one call queued is 3.75s of expected wait), while its callers expect
// to wait about a call's time. Three rounds of its own calls is the
// queue such a pool may hold: a caller waits at most about three times
// what the call itself takes, and the queue left when an overload ends
// is worked off in three call times. Any pool whose calls take under
// 2s/3 (666ms) keeps 2s. The call time is measured, not declared: the
// time a call spends in flight (taken by a worker, not yet acknowledged),
// by Little's law — the pool consumer's NumAckPending integrated over
// time over the calls finished, both decayed with a half-life of a
// minute, so that it covers several calls of even a slow tool and
// follows a tool that turns slower or faster within minutes. It holds
// at any load, busy or not; idle time counts nothing; while the figure
// rests on few calls it errs high by at most one call in flight over all
// it measured. It changes only at a read that found calls finished: a
// stall (workers that stopped answering) is not taken for slow calls,
// so while nothing finishes the bound stands and the growing expected
// wait refuses. Until a call finished it is unknown and the bound is
// MaxQueueWait. Load.Pools reports both (PoolStatus.WaitBound,
// PoolStatus.CallTime).
//
// The view is cached: admission never asks the server. One goroutine per
// replica lists the calls stream's pool consumers every
// LoadConfig.Refresh (the dispatcher's Config.LoadRefresh, 500ms: within
// the 250ms–1s that keeps the view fresh enough for refusals to stop
// within half a second of a backlog draining, at two requests a second
// per replica) and reads every store's stream info and the account's info
// every 2s (stores fill over minutes). Start reads it once before it
// returns, so that the first calls are checked too. A call's pool is the
// consumer whose filter matches its subject (bus.SubjectMatches), cached
// per subject. Between reads a pool's backlog is estimated: the last
// read, plus what this replica admitted since (so one replica does not
// overshoot a bound; a call whose publish was not yet answered when the
// read was sent counts as admitted since, as the read may not have found
// it: Admitted.Settle tells the view its publish is answered), less what
// the pool finished since at its drain rate (a fast pool finishes many
// times its bound between two reads). A pool whose last read found at
// least a refresh interval's worth of calls queued stays busy until the
// next read, so it drains at its capacity and the estimate is trusted:
// refusals are at once. Otherwise a refusal that only this replica's
// admissions since the last read bring about is not made on the estimate
// (the pool's rate is then the rate calls arrived at, not what it can
// finish): the caller waits for the next read, asked for at once (at
// most one every 20ms; callers waiting meanwhile share it), and is judged
// on it. What other replicas admitted since the last read a replica
// cannot see, so N replicas may overshoot a bound by what N-1 of them
// admit in 500ms.
//
// A pool's drain rate is the calls it finished per second (delivered,
// less the growth of ack-pending), measured at every read; while the pool
// has a backlog, its capacity. It bounds the wait of the calls admission
// accepts, so it errs low, never high:
//
//   - when calls finished in the last 500ms, it is the lower of that
//     window's rate and the last 2s's: a pool that slows down is seen
//     slower at the next read (before, the mean of 2s over-admitted
//     calls that then expired while the pool finished a tenth of that);
//     when the load jumps it lags by up to 2s, refusing calls a little
//     early;
//   - when none finished in the last 500ms but calls are in flight (slow
//     calls, workers that stopped answering, a stream electing a leader),
//     the pool is stalled: the rate is the one it drains at once it
//     resumes (the busiest seen, decayed as below), and the expected wait
//     is the time stalled so far — as long again is the guess for what
//     is left — plus the queue at that rate, so it grows with every read
//     and a pool that stays stuck is refused within its bound (unknown
//     while the pool never finished a call). Before, the rate itself fell
//     as the calls in flight over the time stalled, so a 5s leader
//     election with 32 calls in flight read as 6 calls a second, and a
//     queue of 450 that the pool works off in a second as 80s: calls
//     were refused under a one-minute bound (TestClusterLeaderKills);
//   - when none finished and none are in flight but calls are queued
//     (the workers gone), it is the busiest rate seen, halving every
//     10s, so the expected wait grows rather than becoming unknown;
//   - when the pool has nothing to do (none delivered, in flight or
//     queued at a read and the one before), the rate stands: an idle
//     pool is not a slower one. Before, it halved every 10s while idle
//     too, so a burst after a minute's rest was judged at 1/64 of the
//     pool's rate and refused ("would start this call in about 20s" for
//     a queue the pool drained in a fifth of a second). A read whose
//     interval began or ended with nothing in flight or queued counted
//     how much work came, not how fast the pool drains: it may raise the
//     rate, never lower it. A pool that was never busy has no rate yet,
//     and its first interval of work is judged as measured (partly idle,
//     so low): a burst into a pool fresh from start-up may be refused
//     for one read.
//
// A failed read keeps the last figures (logged once per streak). A call
// whose subject no pool consumer filters is not checked here.
//
// An overload refusal is not recorded as a REJECTED event, unlike the
// other refusals (the dispatcher's overload step decides that): under
// overload most calls are refused, and a stored message per refusal would
// grow the server's memory with every refused call id and fill the events
// store, whose use would then refuse every call (toolwire-bench -overload
// refused about 3,400 calls a second, each answered in well under a
// millisecond). The caller has the answer; the call id, never queued, is
// PENDING to GetResult while recent (10s), then UNKNOWN. The figures are
// in the metrics (Load.Metrics: toolwire_dispatcher_pool_backlog,
// _backlog_bound, _drain_rate, _expected_wait_seconds,
// toolwire_store_bytes, toolwire_store_max_bytes; the dispatcher counts
// toolwire_dispatcher_overload_refusals_total), on the dashboard's pools
// page (Load.Pools, Load.Stores, Load.PoolOf: the last read, no read of
// their own) and in docs/reliability.md ("Overload").
//
// # Paused pools
//
// A pool paused by an administrator (bus.PausePool) is paused on its
// consumer, with the record of who paused it. Each read takes both
// (PoolStatus.Pause: Paused, Record, and Drift when they disagree — a
// pause made or undone through the NATS API behind toolwire's back), and
// Check and Peek refuse every call to a paused pool before any other
// pool check: OVERLOADED, retry_after 30s, cause telemetry.OverloadPaused
// (internal/dispatch doc.go, "Paused pools", for why). Reread asks for a
// read at once (the replica that paused or resumed).
//
// # Pool check
//
// No call is admitted unless a pool consumer filters its subject: a tool
// registered with no pool to run it (a worker that published what it does
// not serve, a pool whose consumer an operator deleted) is refused
// NOT_FOUND, not retryable, side effects NONE, message "tool X has no
// worker pool: no pool consumer takes its calls (<subject>)", suggestion
// to start a worker serving it (the dispatcher's pool step, on
// Pools.Served answering false). Before, such calls were accepted and
// stayed PENDING for good (a pool created later with DeliverNew never
// delivers them). NOT_FOUND, like an unknown tool: from the caller's side
// the tool cannot be run here, and retrying the same call does not help
// until an operator acts. Admission stays cheap: it reads a cached view of
// the pool consumers' filters (Pools; consumers named <prefix>_pool_*,
// never an audit's or a watcher's), listed again every PoolsConfig.Every
// (the dispatcher's Config.PoolCheck, 10s; negative there = no check and
// no Pools) by one goroutine per replica. A subject the view does not
// cover is looked up in a fresh listing before it is refused when the
// view began before the registry store took the tool's spec in (a worker
// creates its consumer before it publishes its specs, so a pool that just
// started is never missed) or is over 1s old; such listings are shared by
// concurrent callers, so a flood of calls for a tool no pool serves costs
// at most one listing a second. A covered tool costs a map lookup and no
// allocation. A deleted pool's tools are refused within
// PoolsConfig.Every. When the consumers cannot be listed (no stream
// leader), calls are admitted and a warning logged (at most every 10s):
// the orphan sweeper (internal/maintenance) ends any that no pool
// consumes after all.
package poolview
