// Package dlq reads and retries the dead letters of a toolwire
// installation: the DeadLetter records workers and the dispatcher's
// reaper write to the DLQ stream when a call exhausted its attempts or
// was terminated (an undecodable message, a subject that disagrees with
// its payload, an unknown spec version). It backs `toolctl dlq`, an
// operator tool that talks to NATS directly.
//
//	q, err := dlq.Open(ctx, nc, "toolwire")
//	letters, err := q.List(ctx, dlq.ListOptions{Limit: 20, Tool: "search"})
//	call, err := q.Retry(ctx, letters[0].Seq)
//
// # Read-only attachment
//
// Open looks the streams up by name (bus.OpenView, the read-only view
// audit and replay share) and never creates or changes them:
// an operator tool must not rewrite an installation's stream limits with
// its own defaults, as bus.Open (create or update) would. List reads with
// a bus.Scan: it leaves no consumer on the DLQ stream when it returns.
//
// # Retry
//
// Operators do not publish calls (their NATS role, bus.RoleOperator, may
// not): RequestRetry sends the sequence to bus.DLQRetrySubject, where
// dispatchers serve ServeRetries in one queue group and run Retry. A
// dispatcher's Retry republishes a dead-lettered call as a new call: a fresh ULID call
// id, the same tool, spec version, argument bytes, caller, approval token,
// executor, provider and dispatcher routing, attempt reset and accepted
// now. It also stores the call's ACCEPTED event, as the dispatcher does at
// admission, so GetResult and Watch of any replica know the new id. The
// record itself stays in the DLQ. Not carried over:
//
//   - the schedule-to-start and schedule-to-close deadlines, which were
//     computed from the original acceptance and would have passed; the
//     retried call runs under the tool's per-attempt timeouts only;
//   - the idempotency key, which names the original call in the
//     installation's key index; the retry is an operator's new call.
//
// A record whose call could not be decoded (raw bytes only) cannot be
// retried: Retry returns ErrNotRetryable.
//
// A retry runs a call again without admission, so a Queue the dispatcher
// retries with asks it first (CheckWith; the check is the dispatcher's
// CheckRetry, the one an approval of a parked call makes, not a copy
// here): a call whose session has ended is refused with ErrSessionInactive
// (SESSION_INACTIVE), one its session's mode now forbids with
// ErrModeRestricted (MODE_RESTRICTED), one the policy in force now denies
// with ErrPolicyDenies; nothing is published, and RequestRetry maps the
// served refusal back onto the same errors. A check that cannot decide
// (the sessions bucket or the registry does not answer) refuses too. A
// Queue without a check (an operator tool's, which only reads and sends
// RequestRetry) retries every decodable call: the dispatcher's retry
// service and its dashboard set one.
//
// # Purge
//
// Purge removes one dead letter from the DLQ: the letter only. What
// purge may safely mean follows from where a call is kept: the DLQ
// stream (limits retention, deletes allowed) holds a copy of the call as
// it ran, made for retries; the call's own record is its message in the
// calls stream (which denies deletes and purges: the audit log), its
// events and its result (whose meta says it was dead-lettered), which
// audit, replay and the dashboard read. So Purge
//
//   - purges a letter only once the caller has named where its call's
//     record is in the calls stream, that message is that call of the
//     letter's tenant and tool, and the results stream holds a believed
//     result of it (ErrNotPurgeable otherwise: a letter whose call is not
//     confirmed there, whose call has no result yet, or that holds no
//     decodable call, may be the last record of what it held or of why
//     its call died, and is kept until the DLQ's own age limit);
//   - records a DEAD_LETTER_PURGED event of the call first, built from
//     the calls stream's record (its caller, spec version and dispatcher:
//     a letter is written by a worker, and is not believed), signed as
//     the dispatcher's, naming who asked and the letter's sequence, with
//     the message id purge-<seq>: a repeated or concurrent purge of the
//     letter is recorded once (within the events stream's duplicate
//     window). No letter is removed without it; a failed removal leaves
//     the letter with the event written;
//   - then deletes the letter's message with the server's secure delete:
//     the letter's copy is overwritten. A removal that finds the letter
//     gone counts as done (another purge removed it).
//
// A purge does not erase the call's secret arguments: the call's message
// in the calls stream still holds them in clear (it denies deletes; the
// audit redacts them on read), and on a replicated stream the raft log
// keeps the letter's original append until it is compacted. Only the
// dead letter's copy is overwritten.
//
// A purged letter can no longer be retried from the DLQ; the call can
// still be replayed from its record (internal/replay).
//
// # Showing a letter
//
// A dead letter stores its call as it ran, secret arguments in clear (a
// retry runs it). Queue.Shown returns the copy to print, redacted as
// audits redact (internal/redact): the argument fields the spec version's
// schema marks secret replaced, their values replaced in the reason and
// the last error, arguments of a version no longer in the registry (or
// when the registry bucket cannot be read) replaced whole, and the raw
// bytes of an undecodable call withheld. Open therefore also attaches to
// the registry bucket, read only.
package dlq
