// Package bench measures toolwire end to end against a raw JetStream
// baseline doing the same round trip, as DESIGN.md §11 asks: calls per
// second and latency percentiles of the no-op echo tool at several numbers
// of calls in flight, the ratio of each toolwire path to the baseline, and
// the dispatcher's memory per 10,000 calls in flight.
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
//   - jetstream-baseline: the same round trip written directly against
//     nats.go's jetstream package with nothing of toolwire in it: an async
//     publish with a message id to a limits stream, a durable pull consumer
//     fetching at most its free slots, a result published with
//     ExpectLastSequencePerSubject(0) to a results stream, an ack, and the
//     caller's receipt on a core subscription. Its payloads are the bytes
//     of a real echo ToolCall and ToolResponse, captured from a toolwire
//     round trip, with the call id substituted.
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
//     the limit.
//   - The suite runs each level's measurements in interleaved rounds
//     (baseline, nats, nats+policy, http, baseline, ...) and reports the
//     median run, so
//     a burst of other load on the machine hits every system alike.
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
