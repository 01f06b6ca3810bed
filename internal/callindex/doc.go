// Package callindex is the calls index: a bounded in-memory index of the
// newest calls of an installation, which the dashboard's calls page lists,
// filters and searches without reading JetStream for each request.
//
// An Index holds the newest Config.Max calls (default 1,000,000), rebuilt
// from the CALLS and RESULTS streams when its Feed starts and kept live by
// following both. The Feed (a startstop.Service) is the index's one
// writer; any number of readers (the dashboard's HTTP handlers) query
// under a read lock. Each dispatcher replica keeps its own index; the
// streams are the truth. A reader that needs more of a call than the index
// keeps (its events, its whole result) reads the streams by the call's
// CALLS sequence (audit.Source.One), so a call's timeline is never cut to
// what the index keeps.
//
// # What is indexed
//
// Per call: its id (the ULID as 16 bytes), CALLS sequence, stored time,
// tenant, agent, session, tool, outcome, error type, worker, duration, and
// up to 255 bytes of search text. Calls whose id is not a ULID,
// undecodable CALLS messages, retry re-entries (a message whose
// Nats-Msg-Id is not its call id) and replays (shadow subjects; their
// results, on the replay dispatcher's subjects) are not calls of the list
// and are skipped, as audits skip them (audit.DecodeCall).
//
// # Memory
//
// The fields live in columns (columns.go: one slice per field, indexed by
// the same ring slot) of 70 bytes a call: sequence 8, time 8, id 16, six
// interned strings 4 each, duration 4, outcome and flags 1 each, search
// text reference 8. Strings that repeat (tenant, agent, session, tool,
// worker, error type) are interned into uint32 symbols with reference
// counts (intern.go), so a symbol goes when its last call is evicted. Call
// ids are found through an open-addressing table of uint32 slots
// (idtable.go; 8 bytes a call at its load factor of at most 1/2). Search
// texts are copied into 1 MiB slabs of one arena (arena.go), not kept as
// one Go string per call; a slab is freed when no call's text is left in
// it. At 1,000,000 calls with texts of about 95 bytes the whole index
// takes 178 bytes a call, 170 MiB of heap (BenchmarkIndexQuery1M, Memory).
// The columns grow with the calls (doubling, capped at Max) rather than
// being allocated for Max up front.
//
// # Eviction
//
// The columns are a ring of Max slots; the call admitted next replaces the
// oldest, whose id, symbols and text are released.
//
// # Rebuild and the live feed
//
// A run of the feed (feed.go) reads CALLS from the sequence that covers
// the newest Max messages (retry re-entries and replays take sequences
// too, so a little fewer than Max calls may be kept), then, with every
// call of that window in place, RESULTS from the oldest indexed call's
// time less a minute (TimeSlack: clock skew between the leaders of the two
// streams) up to its last sequence (with bus.Scans named callindex_…,
// never an operator's scan slot), then closes Ready and follows both
// streams live with ordered consumers. Each call costs two protobuf
// decodes (call and result) and, for the first call of each tool version,
// one registry read (Specs): 25,000 to 35,000 calls with their results a
// second on two cores shared with an embedded server
// (BenchmarkIndexRebuild), so about half a minute for a million. A result
// read before its call (a call admitted while the rebuild runs, or
// delivered first by the live consumers) waits in a bounded map of 4,096
// orphans (fifo.go) until the call is indexed.
//
// A run that fails (its stream reads failed for good: a long outage) is
// started again by the Feed after a pause of 1s, doubling to 30s, and
// carries on from the newest call the index has: the calls and results
// stored meanwhile are indexed once. Live subscriptions end when a run
// ends; subscribers subscribe again.
//
// # Search
//
// A query's Text is a case-insensitive substring of the call's search text
// (searchtext.go): the call's arguments as the audit shows them (secret
// fields replaced by [REDACTED], redact.Plan.Arguments), then the result's
// text (error message, text content, or structured output when there is no
// text content) with the call's secret values replaced
// (redact.Secrets.Bytes; every argument value when the spec version is
// unknown), both lowercased; once a result is in, the arguments keep up to
// 158 bytes so that at least 96 bytes of result text fit.
//
// Search never covers: secret argument values (also not where the result
// repeats them); the arguments of a call whose spec version is not in the
// registry (no argument text is indexed then: fail closed); for a call
// that has secret values, its result text when its secrets are no longer
// held (the feed holds them for at most 16,384 calls awaiting their
// result, within 64 MiB, so after the rebuild of a busy installation older
// such calls have no result text) or when the text was longer than 4 KiB
// (a cut may halve a secret); anything past the 255 bytes; identifiers
// (filters cover them). A secret shorter than redact.MinLen is replaced in
// result text only where it stands quoted, as everywhere in the fabric.
//
// # Queries
//
// Queries (query.go) scan the columns from the newest call down, comparing
// interned ints (a filter value that names no symbol answers at once), and
// stop once the page is full and MatchedCap matches are counted; a cursor
// (Before) and a time range are found by binary search on the ring, which
// is in CALLS order (stored times are taken to increase with the sequence,
// to within TimeSlack). A rare filter scans every call: about 5 ms a
// million for ints, 30-60 ms with text, where each text is looked at only
// where the needle's rarest byte occurs (BenchmarkIndexQuery1M: p95 of
// mixed queries about 45 ms).
//
// # Refused calls
//
// Calls admission refused never reach CALLS; the dispatcher records each
// as a REJECTED event in the EVENTS stream (an overload refusal stores
// nothing, by design, and is not indexed). With Streams.Events the feed
// keeps them in a ring of their own (refusals.go; Config.MaxRefusals,
// default 100,000, the same columns at the same cost a call), so that a
// flood of refusals never pushes admitted calls out: per refusal its id,
// EVENTS sequence (Entry.Seq), stored time, tenant, agent, session, tool,
// outcome "rejected" (audit.OutcomeRejected), error type, and its reason
// (Entry.Reason: the refusal's message, cut to MaxReasonBytes, interned;
// its tool, tenant, agent and session, which its caller chose, cut the
// same way, so that the ring's memory is bounded by MaxRefusals;
// a refusal has no worker) with the policy rule as search text. Only a
// REJECTED event a dispatcher signed is a refusal (internal/believed,
// as audits check it); the feed reads each event's type field without
// decoding the rest, so the other events cost little. The rebuild reads
// EVENTS from the oldest indexed call's time less TimeSlack (a run again:
// from after the last event the feed read), after RESULTS; live, a third ordered
// consumer follows EVENTS. That read takes every event stored since
// (several a call: ACCEPTED, STARTED, FINISHED, progress), each skipped
// after its type field: it adds to the rebuild about what reading that
// many messages from JetStream costs (BenchmarkIndexRebuild stores no
// events, so its figure leaves it out; not measured yet). Get finds a refused call after the admitted
// ones; List pages through both together, newest first by stored time,
// with a Cursor of one sequence per ring, a call both admitted and
// refused (OVERLOADED after a publish that reached the stream) listed
// once, admitted (Query reads the admitted calls only).
//
// # Live updates
//
// Subscribe (subscribe.go) hands every call indexed (refused ones
// included) and every call whose outcome changes to at most MaxSubscribers subscribers, each with a
// buffer of SubscriberBuffer updates; a subscriber that does not keep up
// loses updates (Stats.Dropped) and never holds the feed up.
package callindex
