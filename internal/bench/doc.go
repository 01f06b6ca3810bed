// Package bench measures toolwire end to end against a raw JetStream
// baseline doing the same round trip, as DESIGN.md §11 asks: calls per
// second and latency percentiles of the no-op echo tool at several numbers
// of calls in flight, the ratio of each toolwire path to the baseline
// (jetstream-raw, issue 33's), and the dispatcher's memory per 10,000
// calls in flight.
//
// # Systems
//
//   - toolwire-nats: callers call Dispatcher.Call in-process; the call
//     crosses NATS to an in-process worker pool and its result comes back
//     over NATS. This is the dispatcher core without any API server.
//   - toolwire-http: callers use the generated Connect client (binary
//     protobuf) against a real net/http server on loopback serving
//     api.NewService(...).Handler(identity.OpenAccess{...}) with the
//     same HTTP settings as dispatchd.Run, over HTTP/1.1 keep-alive with a
//     connection per call in flight (default, as pkg/client's default
//     transport) or h2c.
//   - toolwire-nats+policy: toolwire-nats with a 50-rule policy in force
//     (policytest.FiftyRules: 30 tenant rules and 20 in the caller's agent
//     layer, 20 of them on every tool with argument globs or CEL
//     conditions); the echo call is allowed after 20 rules are evaluated.
//     The suite reports its calls/s as a share of toolwire-nats' at each
//     level (the goal is at least 0.9× at 64 in flight).
//   - toolwire-nats+limits: toolwire-nats with a policy whose one rate
//     limit and one budget (per agent, never reached) count every call in
//     the limits bucket; reported as a share of toolwire-nats' calls/s
//     (the goal is at least 0.8× at 64 in flight). Measured with
//     `go run ./cmd/toolwire-bench -path nats -n 40000 -inflight 64
//     [-limits]`, alternated three times on the 2-core machine: 24,960 /
//     21,033, 24,645 / 21,319 and 24,791 / 21,377 calls/s, 0.84-0.87×; p50
//     2.2 → 2.55 ms; CPU 72 → 87 µs and 246 → 299 allocations per call.
//   - toolwire-nats+hook: toolwire-nats with one native before-hook
//     (bench_hook, read-only and idempotent, which lets every call go on)
//     on every call: a second call through the fleet per call; reported
//     as a share of toolwire-nats' calls/s, with the p50 and the CPU per
//     call it adds. Measured (-hook, alternated twice, 20,000 calls at 64
//     in flight): 23,425 / 10,206 and 23,027 / 10,341 calls/s (0.44-0.45×),
//     p50 2.3 → 5.2 ms (+2.9 ms), CPU 76 → 174 µs per call (+98 µs). A hook
//     tool that is neither read-only nor idempotent needs a durable
//     STARTED before each run: 7,199 calls/s, p50 7.7 ms, 233 µs (the
//     profile that found it).
//   - toolwire-nats+sessions: toolwire-nats with every call naming one of
//     InFlight sessions, each opened in the voice mode beforehand, under a
//     policy that pins spec versions per session, checks every call
//     against the voice layer's rule and admits only opened sessions
//     (sessionsPolicy; the loop guard off); reported as a share of
//     toolwire-nats' calls/s (issue 30's goal: at least 0.9× at 64 in
//     flight; BENCHMARKS.md has the runs measured with -sessions).
//   - toolwire-http+shaped and toolwire-http+plain (-shaped; the suite
//     runs it after the memory measurement): issue 31's cost, calls with
//     a client profile, a model's toolset and a delegation chain in force
//     against calls without them on the same stack. Described under
//     "Shaped calls".
//   - jetstream-raw (-path baseline): the baseline every other system is
//     reported against (issue 33): the same round trip written directly
//     against nats.go's jetstream package with nothing of toolwire in it,
//     its worker one Consume callback, its caller one core wildcard
//     subscription for every result. Described under "The baseline".
//   - jetstream-fetch (-path baseline-fetch): the first baseline, named
//     jetstream-baseline in BENCHMARKS.md's runs up to 2026-11-30: the
//     same caller, streams and consumer, but the toolwire worker's loop
//     on the worker side: Fetch at most the free slots (max(64, in
//     flight)), a goroutine per call, the result published synchronously
//     (PubAck awaited), then the ack. It is slower than jetstream-raw (a
//     pull request per batch, a goroutine and a server round trip per
//     call before the next result can go out of that goroutine), so
//     ratios against it read higher. The suite runs it beside
//     jetstream-raw so the figures measured against it can be related to
//     the new ones.
//
// Both baselines' payloads are the bytes of a real echo ToolCall and
// ToolResponse, captured from a toolwire round trip, with the call id
// substituted, and they store them like toolwire does: the call with a
// message id on a limits stream configured like CALLS (file storage, a
// 10-minute duplicate window, discard-new), the result with
// ExpectLastSequencePerSubject(0) (write-once) on one configured like
// RESULTS, through a durable pull consumer configured like a pool's
// (explicit ack, MaxAckPending 1024). They use their own names
// (BENCHBASE_*) and decode nothing: the worker reads the call id at its
// fixed offset in the call's bytes, the caller the id a result carries at
// its offset in the result's bytes.
//
// # The baseline
//
// Issue 33 defines the physical limit of a toolwire round trip as a raw
// JetStream round trip doing the same two stored messages, in process:
// the caller publishes to a stream, one Consume callback publishes the
// result to a second stream and acks, the caller receives results on one
// core wildcard subscription. jetstream-raw is that, with each step's
// wait decided as follows.
//
//   - The caller registers a waiter, publishes the call asynchronously
//     with its message id and awaits the call's PubAck, then awaits its
//     result. A call counts as done only once its call message is stored
//     (the PubAck) and its own result has arrived: that is what
//     Dispatcher.Call promises (it returns after the call's
//     acknowledgement; "two stored messages" means both stored, not
//     merely sent). Awaiting the PubAck first costs the round trip
//     nothing it could avoid: the consumer delivers only stored messages
//     and the server sends the PubAck as it stores one, so the PubAck is
//     on its way before the call can reach the worker. A synchronous
//     publish (js.Publish) would wait for the same PubAck; the async one
//     with the future awaited is what toolwire's dispatcher does.
//   - The worker is one Consume callback (nats.go's default pull
//     settings: 500 messages buffered, a new pull at half). For each
//     call it publishes the result asynchronously with
//     ExpectLastSequencePerSubject(0) and queues the call's ack behind
//     the result's PubAck: one acker goroutine awaits each result's
//     future in publish order (one connection's PubAcks of one stream come
//     back in that order) and then acks the call, or naks it if the
//     publish failed. A call is never acked before its result is stored —
//     the at-least-once rule toolwire's worker keeps (acking on the
//     publish alone would lose the result of a call whose server stopped
//     between the two, and would make the baseline faster by dropping a
//     promise toolwire keeps) — and the callback never waits for the
//     server: awaiting the PubAck inside it would put a server round
//     trip per call on the consumer's one goroutine, which is not the
//     physical limit of two stored messages but a limit of that loop.
//   - The caller hears of each result from one core subscription on
//     benchbase.result.default.bench.* (its pending limits off), and
//     wakes the waiter the subject names with the id the payload
//     carries; the caller checks the two agree. A core subscriber can see
//     a result before the stream has stored it; the worker's ack, not
//     the caller, waits for that store.
//
// The caller side is shared with jetstream-fetch, so the two differ only
// in the worker. Every system is reported against jetstream-raw measured
// in the same suite, at the same number in flight: its calls/s ratio at
// each level, and at 1 in flight also its p50's ratio (the report's
// "Against jetstream-raw" table, issue 33's layout).
//
// # Decisions
//
//   - Every measurement gets a fresh embedded server (file storage in a new
//     temporary directory, fsync every second: production's defaults), so
//     no measurement inherits another's stream state.
//   - Clients reach the server over in-process connections (the default of
//     an embedded installation) unless Config.Conn is "tcp"; the caller side
//     and the worker side always have a connection each, in toolwire and in
//     the baseline alike.
//   - The worker pool runs max(64, in flight) calls at once, so it is never
//     the limit (toolwire's and jetstream-fetch's; jetstream-raw's one
//     callback is bounded only by the consumer's MaxAckPending, 1024).
//   - The suite runs each level's measurements in interleaved rounds
//     (jetstream-raw, jetstream-fetch, nats, nats+policy, ..., http, mcp,
//     jetstream-raw, ...) and reports the median run, so a burst of other
//     load on the machine hits every system alike.
//   - Besides wall-clock throughput every run reports the process's CPU
//     time per call (server, dispatcher, worker and callers all run in
//     this process), which other load on the machine disturbs far less.
//   - Load is a closed loop: InFlight goroutines each start their next call
//     when the previous one returns. Warm-up calls run first and are not
//     counted. Every system warms up for at least worker.ClockSkew (one
//     second), and toolwire until its worker has run that long: calls
//     admitted in a worker's first second also look their cancel key up
//     in the bucket (a start-up cost, not the steady state measured). The
//     same minimum for the baseline gives both about a second's worth of
//     stored calls when the measurement starts (the server indexes them in
//     memory, and a larger live heap makes every GC cycle dearer). Latencies are exact: every call's duration is kept and
//     sorted (nearest-rank percentiles).
//   - Memory per 10,000 calls in flight: see MeasureMemory.
//
// # Shaped calls
//
// MeasureShaped (toolwire-bench -shaped) measures what issue 31's shaping
// costs a call: "with a profile, a toolset and a chain in force, calls/s
// at least 0.9× without at 64 in flight". A shaped call is the plain
// http path's echo call through the Connect client with three things
// more: the Toolwire-Client-Profile header naming the shipped claude
// profile (the API renders the answer with it: `_meta` filtered,
// fallbacks), the model claude-sonnet-4-5 in the request (the policy's
// model_families glob puts it in the claude family, whose toolset is in
// force: sleep, fail and the bench's own tools hidden, echo offered with
// a schema variant each call is checked against too), and a
// parent_call_id naming a call that runs for the whole measurement (the
// delegation step: the parent reached, its state read, the link written,
// its children and its chain counted).
//
// Decisions:
//
//   - The http path, the Connect API: it is the one face where all three
//     apply together. The nats path (Dispatcher.Call in process) renders
//     no profile (the faces do); MCP's tools/call takes a profile
//     (clientInfo or the header) and a model (the Toolwire-Model header)
//     but no parent (docs/delegation.md, "What is not there yet").
//   - One stack for both kinds, and interleaved runs: plain and shaped
//     calls are measured on the same server, dispatcher, worker and HTTP
//     client, in Pairs pairs (default 3), plain first in the first pair
//     (its warm-up also waits out the worker's start-up window) and the
//     order alternating after that (P S, S P, P S), each run after its
//     own warm-up; the ratio stated is the median of the pairs' ratios, so
//     a burst of other load or the stream's growth weighs on both kinds
//     alike. The plain calls therefore run under the same policy document
//     (default allow, the model families and toolsets, the loop guard on;
//     a call without a model meets no toolset, and the guard counts per
//     session, which neither kind names) and beside the same held
//     parents: the difference between the kinds is what a call names,
//     nothing else. What a policy document costs by itself is
//     toolwire-nats+policy's measurement.
//   - The parents: calls of bench_parent, a native tool that holds its
//     slot until the measurement releases it (start-to-close an hour),
//     served by a second in-process worker in a pool of its own
//     (bench-parents, a slot for each parent), submitted through the
//     dispatcher core before the first run, while that pool is idle (so
//     the queue-wait bound admits them), and awaited until all run. Not
//     in echo's pool: a running call counts in its pool's backlog (the
//     consumer's calls awaiting ack), by which admission judges a call's
//     queue wait (9 of the "10 calls queued" when an echo call was
//     refused OVERLOADED, on a loaded machine, were held parents); apart,
//     echo's pool, its slots (max(64, in flight)) and its backlog are
//     those of every other system. A parent counts every
//     child admitted against the dispatcher's bound on its children
//     (256), finished or not, so the shaped calls are spread over enough
//     parents for every shaped run's warm-up and measured calls,
//     ChildrenPerParent to a parent in order (default 256, the fewest
//     parents: the suite's 3 pairs of 20,000 calls and 2,000 warm-up take
//     258; -children takes fewer a parent, as the package's test does to
//     keep the delegation step's listing of a parent's children short).
//     The limits bucket, where the chain's records live for 24h (about
//     half a KiB a call), is 1 GiB on this stack, so a long measurement is
//     not refused for a full store.
//   - The dispatcher's bound on queue wait is its default (2s), as for
//     every system; -max-queue-wait changes it. On a loaded machine the
//     shaped calls were refused OVERLOADED by it at 64 in flight ("12
//     calls queued, finishing about 5 a second", with nothing pending or
//     awaiting ack on the consumer): the pool's rate is measured from the
//     calls it finishes, and slow admissions feed it few. A refused call
//     fails the run, as everywhere in the bench.
//   - Checked, not assumed: after the runs the first and the last parent
//     used must have as many children (the API's GetDelegation) as shaped
//     calls named them; a failed call stops the run with its error's text.
//     At the end the parents are released and their results awaited (at
//     most 30 s), then the stack stops; stop releases them too, so no
//     error path leaves a parent holding the worker.
//   - No CPU or allocation profile (-cpuprofile, -memprofile): the runs
//     are several, of two kinds.
//
// # Hostile requests
//
// MeasureAttacks (toolwire-bench -attack) sends each class of Attacks —
// bodies over the size limit (100 MB streamed, a million keys), bodies at
// the limit shaped to be dear to decode (many keys, long arrays, deep
// objects and arrays, in JSON and binary protobuf), a gzip bomb, and the
// widest arguments the limits admit in either form — alone and ten at
// once, five rounds each, to a dispatcher process of its own (this binary
// with -attack-server: dispatchd.Run with its defaults, embedded server and
// in-process workers), over HTTP/1.1 on loopback. For each it reports the
// answer (every request must get the expected one or the run fails), the
// median and slowest time from sending a request to its answer, the
// dispatcher's CPU time per request (/proc/<pid>/stat, 10ms ticks), its
// peak resident memory growth (VmHWM, reset through clear_refs before the
// first round, less VmRSS then) and the resident memory it still holds a
// second after the last round. A fresh process per measurement keeps one
// attack's heap from hiding the next one's growth.
//
// # Overload
//
// MeasureOverload (toolwire-bench -overload) offers one pool many times
// its capacity and reports what the dispatcher's explicit overload does
// with it (internal/poolview, "Overload"). The pool (Concurrency slots, 8)
// runs the built-in sleep tool for Service (20ms), so the pool, not the
// dispatcher, is the bottleneck on a small machine. Phases: the capacity,
// measured with a closed loop of 4 × Concurrency callers for Baseline
// (5s); then open-loop load, every call on its own goroutine whatever the
// answers: half the capacity for Baseline, Factor (10) times the capacity
// for For (60s), half the capacity for Recovery (15s). Every call carries
// ScheduleToStart (2s; negative = none: the dispatcher's default bound on
// queue wait, 2s, applies). The calls are made in process (Dispatcher.Call)
// or, with Config.Path http (-path http), through a Connect client over
// loopback HTTP to the API server as dispatchd serves it (-http http1 or
// h2c), so that the time to a refusal is the client's. For each phase it reports the calls sent, answered ok, refused
// OVERLOADED and EXPIRED (accepted, then not started within their
// schedule-to-start, so never run), the latency of ok calls and their
// queue wait (accepted → started, from the response), the time to a
// refusal, the peak heap and the heap still live after a collection at the
// phase's end (every part runs in this process: the server's index of
// stored calls is most of it), peak goroutines, and the pool consumer's
// peak backlog (sampled every 100ms). Recovery is when the p99 latency of
// the calls sent in each second after the overload came back, for good,
// under twice the baseline's p99 (at least the baseline's plus 50ms).
// MaxBacklog sets the dispatcher's pool bound (-1 = none: with no
// schedule-to-start either, the behaviour before explicit overload).
package bench
