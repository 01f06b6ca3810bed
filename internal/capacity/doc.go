// Package capacity measures the JetStream stores of an installation —
// every stream and bucket of the layout (bus.Config.Stores) and the
// account when it has a storage limit (its own, or on a tiered account
// the limit of the tier the installation's streams are in, "R1" for
// bus.Config.Replicas 1) — so that a store filling is seen
// before it refuses calls or drops records: what each holds against its
// limits, how fast it grows, what it takes per call and when it is full
// at that rate. It reads stream info only (one STREAM.INFO request per
// store and one account INFO), which the operator role may make: nothing
// it does writes. `toolctl store status` and the dispatcher's metrics
// (toolwire_store_*, internal/telemetry) are its two faces.
//
// # Figures
//
// Read takes a Sample: each store's bytes, messages, live limits (the
// stream's configuration as the server has it: MaxBytes, MaxMessages,
// MaxAge) and last sequence, and the calls stream's last sequence; the
// account's messages are not counted (Reading.IsAccount: 0, shown as
// unknown, no toolwire_store_messages). Compute turns two Samples of the
// same installation into a Status per store:
//
//   - Used: the fraction of the nearer limit (bytes or messages) in use;
//     -1 when the store is unbounded. JetStream stops a store just under
//     its limit — discard new refuses the message that would cross it,
//     discard old drops its oldest to fit — so a full store reads a
//     little under 1.
//   - FullBytes: the bytes at which the store counts as full. For the
//     stores whose fill refuses calls (Reading.RefusesCalls: a store that
//     refuses writes when full and that calls write — calls, idempotency
//     — and the account) it is the dispatchers' high-water share of
//     MaxBytes (Compute's highWater: the dispatcher's
//     Config.StoreHighWater, DefaultHighWater 0.9, poolview's
//     LoadConfig.StoreHighWater), since that is when new calls start
//     being refused OVERLOADED; for every other store, MaxBytes.
//   - GrowthBytes, GrowthMessages: the net change per second between the
//     two samples — what was written less what aged out, was pushed out,
//     deleted or acknowledged. Negative when the store shrank.
//   - BytesPerCall: the store's mean stored message size times the
//     messages it took (by stream sequence, so removals do not hide what
//     was written) per call written to the calls stream (by its sequence:
//     new calls, and parked retries put back) between the samples; -1
//     when no call was written, the store holds nothing, or for the
//     account. A full store that drops its oldest still reports what each
//     call costs it.
//   - TimeToFull: the time until Bytes reaches FullBytes (or Messages
//     MaxMessages, whichever is sooner) at the net growth. 0 when the
//     store is full now, measured or not: at or past FullBytes, with less
//     room under MaxBytes than its mean stored message (Bytes/Messages),
//     or at MaxMessages — a full store that stopped growing stays full.
//     -1 when the store does not grow, is unbounded, or no rate was
//     measured, and when it ages out faster than it fills: its write
//     rate (mean message size times the messages it took, per second)
//     times its MaxAge is under the limit (events are kept 72h, cancels
//     24h), so it levels off below the limit however fast it grows while
//     it fills up to that balance.
//   - ArchiveLag: how far an archive is behind the store; -1 (shown "-")
//     until an archive reports one.
//
// # The current rate
//
// "Current" is the net growth over a recent window, measured by
// differencing two readings of the stores (no counters are kept on the
// write path):
//
//   - The dispatcher runs a Sampler (a startstop.Service): it reads the
//     stores when it starts and every SamplerConfig.Every (30s), keeps the
//     samples of the last Window (10 minutes: the oldest kept is the
//     newest at least that old), and reports the rate from the oldest to
//     the newest, so the metrics follow a change within minutes without
//     a single quiet or busy moment swinging them. Until its second
//     sample it reports no rate. Every replica samples on its own and
//     reports the same stores: aggregate with max.
//   - `toolctl store status` takes two readings --sample apart (default
//     5s; 0 for one reading, no rate): a short look, which a quiet moment
//     reads as no growth; the metrics give the 10-minute view.
//
// A failed reading is logged (once per change of error) and skipped; the
// Sampler keeps its earlier samples.
package capacity
