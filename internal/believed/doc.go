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
//   - First believed wins. A publisher stores a result only while the
//     subject holds no believed one (ExpectLastSequencePerSubject of the
//     last message there; 0 when there is none), so a forgery stored
//     first (by a worker credential, which may publish on every result
//     subject: permissions cannot tell one call's subject from another's)
//     delays the real answer by one read, never replaces it; and a
//     forgery stored after it is not believed, so readers skip it.
//   - Readers look at the last message first: the call's one result in
//     every case but a forgery's, so the common read costs what it did.
//     When it is not believed, they read every message on the subject.
//   - A refused result is never an answer; the reader that found it tells
//     its OnRefused (the dispatcher counts and logs it at WARN; audit
//     --verify lists it).
package believed
