// Package believed decides which stored result is a call's answer. Results
// are signed (internal/signing); a result on a call's subject is its
// answer only if its signature verifies, its signer is enrolled for the
// pool that serves its tool (or is a dispatcher's key), and it names the
// call and tool it was stored for (Check). Every reader of a call's
// answer goes through Reader.Read — the dispatchers' Call, GetResult,
// Watch and Cancel, the dashboard, the calls index, audit — and every
// writer through Reader.Publish: the workers and the dispatchers'
// answers of their own (the reaper, the overdue and orphan sweepers, an
// approval's refusal).
//
// # Decisions
//
//   - The pool whose key may sign a call's result or attempt events is
//     that of the call's tool as the dispatchers recorded it (the call a
//     caller waits for, the stored call, a followed admission record),
//     never the tool the result names: a key of one pool naming its own
//     tool in another pool's call's result is refused. A reader that
//     cannot tell the call's tool believes only dispatchers' signatures.
//   - Every event but an attempt's (STARTED, PROGRESS, RETRYING,
//     FINISHED) — an admission, a rejection, an approval asked or
//     decided, a cancel request — is believed only from a dispatcher.
//   - First believed wins. A publisher stores a result only while the
//     subject holds no believed one (ExpectLastSequencePerSubject of the
//     last message there; 0 when there is none), so a forgery stored
//     first (by a worker credential, which may publish on every result
//     subject: permissions cannot tell one call's subject from another's)
//     delays the real answer by one read, never replaces it; and a
//     forgery stored after it is not believed, so readers skip it.
//     Readers read a subject oldest first and stop at the first believed
//     result: one read for a call's one result. They read at most
//     MaxScan messages and then the newest one: more forgeries than that
//     before the answer hide it from them (each one is reported) unless
//     it is the newest, though not from the caller waiting in Call,
//     which the results consumer answers.
//   - A publisher never stores after a message it has not checked. Its
//     publish refused because the subject is not empty, it reads the
//     subject as a reader does and then checks the newest message too,
//     even when the read saw none: a publish still being replicated
//     refuses the next one before it can be read. A worker's first
//     publish whose acknowledgement was lost (nats.go sends it again on
//     reconnect) was found that way, and a second answer stored after
//     it unchecked (a partition fault test, 2026-11-30).
//   - A result older than the results stream reaches is read from the
//     archive (ReadArchived, with an archive store): the archived
//     messages of the call's subject, kept with their headers and bytes
//     as stored, checked exactly as live ones, first believed wins. Only
//     for a call a stored call stands behind (its tool known), and only
//     the segments of the call's life: from its time to its deadline and
//     an hour (720h without one), so a made-up id, or one dated before
//     the archive, reads no segment.
//   - A result a pool's key signed is refused (signing.WrongAttempt)
//     when another key holds its attempt's claim: the first believed
//     STARTED of that attempt (lowest stream sequence, the order the
//     workers' claim race decides by) among the call's events on every
//     dispatcher's subject (a result stored under another dispatcher's
//     token is the same call's) stored before the result by the servers'
//     clocks (checkClaim; leader gets on each literal subject through the
//     keyring's signing.EventsReader: a get on the wildcard would have the
//     server walk the stream's blocks). Attempt 0 names none: nothing
//     claims it. A STARTED stored after the result does not count: the decision
//     on a stored result does not change when later events come. A claim
//     found is remembered (signing.Keyring.Claimed): it never changes, so
//     a result stored after it needs no read. Past MaxClaimScan events
//     the check fails (nothing decided), never passes: a worker
//     credential may store events on any call's subject. A dispatcher
//     without in-process workers lists each pool's enrolled keys
//     (signing.Keyring.ListPoolKeys, every 10 s; its dashboard too) and
//     skips the read for a pool with one key — the hot path's, one read
//     fewer a call; in-process workers sign with the dispatcher's key, a
//     second key the listing would not show. Other readers (workers,
//     whose credential may not list the registry, audit) read the events
//     of each such result. An attempt nobody claimed passes: a tool safe
//     to rerun stores no STARTED for a fast call, and a pool's key could
//     claim it first anyway (docs/reliability.md, "What it does not
//     cover"); a worker's answer given before it took an attempt names
//     attempt 0 (internal/worker), which nobody claims.
//   - A refused result is never an answer; the reader that found it tells
//     its OnRefused (the dispatcher counts and logs it at WARN; audit
//     --verify lists it).
package believed
