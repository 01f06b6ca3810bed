// Package limits counts rate limits, concurrency slots, budgets and the
// loop guard's runs in one KV bucket (bus.Bus.Limits) that every
// dispatcher replica shares: nothing is counted per process, so N
// replicas admit what one would.
//
// # Operations
//
//   - Allow: GCRA. A key's state is its theoretical arrival time; a call
//     of cost c at now is admitted when TAT − now ≤ (Burst − c) × emission,
//     and moves the TAT by c × emission. Over any interval t a key admits
//     at most Burst + Count×t/Per units. A refusal writes nothing and says
//     when the units would be admitted (retry_after).
//   - Acquire, Renew, Release, InFlight: a set of holders (the call ids'
//     hashes) with leases. A holder whose lease ended no longer counts, so
//     the slots of a dispatcher that died come back one lease after its
//     last renewal; the dispatcher renews the slots of its calls while they
//     run and releases them at their result (internal/limitgate).
//   - Spend, Usage, Refund: units per fixed window aligned on the Unix
//     epoch (UTC). A spend that does not fit whole is refused and spends
//     nothing; a refund gives units back to the window they were spent in.
//   - Repeat: the loop guard's run in a scope: the same fingerprint, or
//     the same cycle of up to MaxPeriod fingerprints, again and again.
//
// Every key has a TTL (the emission horizon, the leases, the window, the
// loop window) so the bucket holds only live counts; the bucket keeps one
// revision per key and refuses writes when full (discard new), so a count
// is never silently forgotten: the dispatcher then refuses the call.
//
// # Compare-and-set, batched per key
//
// Each operation is a read-modify-write of its key's value with the
// server's compare-and-set (expected last sequence per subject): two
// replicas can never both take the last unit. Requests on one key that
// wait in one process are applied together, in order, in one read and one
// write (up to Config.MaxBatch), and the value last written is cached, so
// a busy key costs about one write per batch; a conflict (another
// replica's write came first) reads again, after a short random pause.
//
// # Why a KV compare-and-set bucket, not JetStream counters
//
// The issue allows either. A counter stream (AllowMsgCounter, Nats-Incr)
// adds atomically, but it cannot hold a GCRA state or a holder set, allows
// neither per-key TTLs nor discard-new, and has no conditional increment:
// a budget must add, compare with the limit and subtract again when over
// (two writes per refusal). Measured with BenchmarkMechanism (a budget,
// the one thing both can do; embedded server, in-process connections, the
// 2-core test machine, `go test ./internal/limits/ -run '^$' -bench
// Mechanism -benchtime 2000x`):
//
//	                              KV compare-and-set   counter stream
//	admit, serial                 40 µs                18 µs
//	admit, 64 callers on one key  2.5 µs               14 µs
//	admit, 4×16 callers, one key  7.5 µs               12 µs
//	admit, 64 callers, own keys   30 µs                14 µs
//	refuse, 64 callers, one key   1.4 µs               24 µs
//
// The counter is about twice as fast on keys nobody else uses at that
// moment; batching makes the compare-and-set five times faster on the
// keys every call passes (a tenant's rate, an agent's budget), which is
// where the cost of limits is, and refusals (the point of a limit under
// load) cost a read instead of two writes. One mechanism for all four
// kinds, with TTLs and discard-new, decided it.
//
// # Keys
//
// A count's key is its kind, the tenant, the limit's id and the key value
// (Key): values that are not plain tokens (letters, digits, _ and -, at
// most 128 bytes) are replaced by "=" and their hashed form, so no input
// can reach another tenant's or another limit's key.
package limits
