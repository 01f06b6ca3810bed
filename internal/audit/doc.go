// Package audit reads an installation's audit trail: every call stored in
// the calls stream, joined with its terminal result (and, on request, its
// lifecycle events), with secret arguments redacted and the trail checked
// for completeness; and it writes and verifies exports an auditor can
// check later. toolctl audit and internal/replay are built on it.
//
// # Reading
//
// Open attaches to the streams (calls, results, events) and the registry
// bucket of the installation with a prefix through bus.OpenView, the
// read-only view dlq and replay share; it never creates or changes one,
// and answers ErrNoInstallation when a stream is missing. Source.Run
// emits one Record per call, in calls-stream order, up to the stream's
// last sequence when the run starts. It reads the calls stream with an
// ordered consumer (256 messages a fetch; a bus.Scan, so no consumer of
// the audit's is left on CALLS when it ends, however it ends, and one left
// by a killed process expires after a minute; none of them ever counts as
// a pool) and looks each call's result up
// by subject with a direct get, Options.Lookups (32) at a time, so memory
// stays bounded whatever the range. A Filter selects by admission time
// (Since, Until), tenant and tool (both narrow the consumer's subject
// filter), session, agent, call id, and outcome or error type name (such
// as "TIMEOUT"). Options.Events adds each call's events, read by direct
// gets (slower, and events live only as long as the events stream keeps
// them), on every dispatcher's subject of the call (an approver's
// APPROVED, a redeemed token's AWAITING_APPROVAL on the parking
// replica's, a cancel another replica recorded). A record shows at most
// 1,000 believed events and counts the rest it read (EventsNotShown); it reads
// at most 10,000 of the call's stored events, believed or not, so that a
// flood of forged events (a worker credential can store any number on a
// call's subject) pushes none of the call's own out of its record; with
// Verify it names the first 100 not believed, the rest in one line, and
// the first event past the 10,000 ("events not read"), never hiding
// events silently. An event whose signer's enrolment cannot be looked up
// fails the read (an error, not a record without it). A server that
// stalls is waited for up to 30s.
//
// # The archive
//
// With an archive store (UseArchive: the store the dispatchers archive
// into, internal/archive) the record is the archive and the live streams
// as one, by the same filters. Run reads the archived calls before the
// calls stream's first sequence (archive.Reader.Each: only the segments
// overlapping the range, streamed a record at a time) and then the
// stream from the next sequence (from Since, when given), as one
// sequence: no call twice, and a sequence missing at the boundary is a
// "gap" as anywhere else — also when the stream holds nothing: the
// sequences after the archive's last up to the stream's last (a lost last
// segment, every message since aged out) are a gap, whatever Until, for
// their times are unknown. Before each fetch it asks the stream for its
// first sequence: what the stream dropped meanwhile (its window ages
// calls out while a long audit reads) is read from the archive before the
// fetched calls, so nothing is lost between the two. A call's results
// and events are read from the archive when the stream's oldest message
// is younger than the call (a minute's leeway, looked up at most once a
// second): those the archive holds with a sequence below the stream's
// first, stored between the call's admission (less a minute) and its
// deadline plus an hour (720h without one) — and once its believed
// result is found, until an hour after that result was stored (the
// call's real end: events stored later are not looked for) — then the
// live ones; archived results go through internal/believed exactly as
// live ones, and a believed one's Signature is the same. Results and
// events segments are loaded whole, indexed by call id, and the last
// three of each stream are kept; of every segment loaded the run
// remembers which calls it holds (call ids only, forgotten an hour
// behind the calls being looked up), and a call's lookup skips the
// segments that hold none of its messages. An audit over archived calls
// thus loads each segment about once — once to learn which calls it
// holds, once more at most for the calls in it — not once per call
// after it (Summary.ArchiveSegmentsRead counts the loads): memory is
// bounded by three segments a stream (archive.Config's
// MaxSegmentMessages and MaxSegmentBytes) and the call ids of an hour
// and more of segments. With Options.Verify, Run also
// verifies the chains of the calls, results and events streams
// (archive.Verify) and adds each problem, and each manifest signer that
// is no enrolled dispatcher's key (signing.DispatcherKey in the
// registry), as an anomaly of kind "archive"; Summary.ArchiveSegments
// counts the segments verified. Exports carry archived records like live
// ones, and internal/replay re-executes them like live ones.
//
// Not every calls-stream message is a call of its own: replays on the
// shadow subjects are skipped, and retry re-entries put back by the
// dispatchers' mover (a message id other than the call id) are counted in
// Summary.RetryEntries, not audited twice.
//
// Each record carries the policy decision that admitted the call
// (Record.Policy, from the call's policy_version, policy_rule, grant_id
// and approval_id: the version of the document in force and the rule that
// allowed it, or the grant or approval that covered an ask; absent when no
// policy was in force). Calls admission refused never reach the calls
// stream: Source.Refusals reads their REJECTED events from the events
// stream instead (same filters, oldest first; with an archive, the
// archived events before the stream's first sequence, then the stream,
// as one sequence exactly as Run reads calls, each rejection checked as a
// dispatcher's whether archived or live — Until ends the run at the
// first event past it, wherever it is read, and a sequence missing
// between the archive's part and the stream's (or its last sequence,
// when it holds nothing) is a "gap" as in Run;
// without one, for as long as the
// events stream keeps them), as records with outcome "rejected", the error
// answered and, when the policy refused, its version, rule and the reason
// the caller was told.
//
// # Outcomes and completeness
//
// A record's outcome is ok, error, cancelled, expired, dead_lettered
// (MAX_ATTEMPTS or a response from the reaper), pending (no result yet,
// within Options.Settle of admission, default 10m), missing (no result
// after that, or an undecodable one: an anomaly) or undecodable (a calls-stream message
// that is no ToolCall: counted, not an anomaly; the workers dead-letter
// it). Without a tenant or tool filter the scan also reads the shadow
// subjects, so sequences are contiguous and a gap in them (deleted
// messages, or with an archive a segment missing from it) is reported as
// an anomaly. Summary.OK reports an audit without
// anomalies.
//
// # Redaction
//
// Redaction is internal/redact's, the one step every sink of the fabric
// uses. A property that the pinned spec version's input schema marks
// "x-toolwire-secret": true (SecretKeyword) is replaced by "[REDACTED]" in
// every record's arguments, whatever the length of its value; the schemas
// are read from the registry's versions and cached. Marks are followed
// through properties, items and additionalProperties. When a mark sits
// where that does not reach ($ref, allOf, patternProperties, ...), when
// the spec version is no longer in the registry, or when arguments that
// should be redacted are not JSON, the arguments are redacted whole:
// nothing is shown that might be secret. The values of the secret
// arguments are also replaced wherever they occur in the record's
// response (content, structured output, error, as in Record.Result, which
// replays diff) and events, so a result stored before workers redacted
// (or by a worker that does not) shows no secret either; without the
// schema every argument value counts as secret there. Record.Call keeps
// the call as stored, unredacted, for replays; it is never printed.
//
// # Exports
//
// An Exporter writes records into a new (or empty) directory: records.jsonl,
// one JSON record a line, then on Close, after an fsync, manifest.json with
// the format (toolwire-audit-export/v1), the filter, the counts per
// outcome, the anomalies, the calls-stream sequences covered and the
// records file's SHA-256. VerifyExport checks the hash, the record count,
// the counts per outcome and that every line is a record; each difference
// matches ErrExportMismatch.
package audit
