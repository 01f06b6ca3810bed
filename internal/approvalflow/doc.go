// Package approvalflow is the runtime of the approval flow (DESIGN §6,
// "Approvals"): what happens to a call the policy asks about, from the
// moment admission parks it to its approved publish or its terminal
// answer. internal/approvals is its model and store (records, grants,
// nonces, tokens, the tracker and the grant index, the worker's
// re-check); this package runs the flow over it. A Flow belongs to one
// dispatcher replica, which starts and stops it (a startstop.Service:
// the grant index, the record tracker and the sweep, in that order) and
// serves it: internal/dispatch parks and redeems calls through it during
// admission, and its API faces (the Connect service, the dashboard)
// call the approve-scope operations. What the flow needs of the
// dispatcher — queuing a call as admission does, recording an event,
// answering a call — is the Core interface; the flow never imports the
// dispatcher.
//
// # The approval flow
//
// An ask parks the call in the approvals bucket (Park); an approver
// approves it (Approve), once or with a grant, or denies it (Deny); a
// caller holding a token approves it itself by sending the call again
// (Redeem); nobody deciding in time expires it (the sweep, sweep.go).
// Each decision is one compare-and-set of the record, so exactly one
// replica decides, and is then finished: the call published (approved)
// or its terminal answer (denied, expired), and the record marked
// published. A replica that stops between the two leaves the finishing
// to the sweep of any replica.
//
// Deny wins at every moment: Approve decides the parked call again under
// the policy in force, in its session's state now (Core.Denies) and, when
// it now denies it, denies and answers it instead (ErrPolicyDenies:
// PERMISSION_DENIED, or MODE_RESTRICTED when the session's mode now
// forbids it; ErrSessionInactive: SESSION_INACTIVE, the session ended
// while the call waited; the record keeps which, Record.DeniedAs, so
// that the sweep finishes it alike); the sweep does the same for
// every parked call of a tenant whose policy version changed
// (recheckParked), so a change that denies them empties the inbox
// without an approver. A token's call goes through admission's rules
// again anyway.
//
// # Approvals
//
// An ask parks the exact call — never on a pool subject — as a PENDING
// record in the approvals bucket (internal/approvals; the approval id is
// the call id), after its idempotency key is claimed, records an
// AWAITING_APPROVAL event (with the decision and the approval, its
// arguments redacted; Watch streams it, the audit shows it) and answers
// CONFIRMATION_REQUIRED, not retryable, with error.approval (the approval
// id, its expiry, and for a caller holding the "confirm" scope, when the
// dispatchers hold Config.TokenKeys, a signed token) and the decision's
// reason, never a rule's text. Submit answers state AWAITING_APPROVAL;
// Call answers it at once, unless wait_for_approval, when it waits (up to
// its wait) for the call's result once approved (AWAITING_APPROVAL when
// the wait ends first); GetResult answers AWAITING_APPROVAL while the
// last event of the call is AWAITING_APPROVAL (or, without events, while
// its record is pending). A record the bucket does not take refuses the
// call (OVERLOADED, retryable, 30s): it is never published unasked.
//
// Approve, Deny, ListApprovals, GetApproval, ListGrants and RevokeGrant
// need the "approve" scope ("*" holds every scope) and see the caller's
// tenant only. Approve is one compare-and-set of the record (PENDING →
// APPROVED): of approvers racing on any replicas one wins, the others get
// ErrApprovalDecided. The call's schedule-to-start and schedule-to-close
// deadlines are stamped afresh (a person's time does not count), the
// record gets its binding (caller, tool, spec version, the arguments'
// SHA-256, approver, nonce, expiry: the call's new schedule-to-close
// deadline, else Config.TTL), the nonce is consumed (a KV create naming
// the call), an APPROVED event recorded, and the call published through
// admission's path (Core.PublishCall: message id the call id) with
// approval_id set and its original dispatcher (a caller waiting on that
// replica gets the result), then its ACCEPTED record. A session, agent or
// tenant scope also stores a grant (the call's session and agent, its
// agent, or the tenant; a tool glob, default the call's tool; argument
// globs; a ttl, default Config.GrantTTL), which every replica's grant
// index holds within the delivery of one KV watch message, and which
// Decide uses for later asks (Grants). Deny (a reason is required) is the
// same compare-and-set to DENIED, an APPROVAL_DENIED event, and a
// terminal PERMISSION_DENIED answer with the approver's reason on the
// call's results subject, with ExpectLastSequencePerSubject(0) as workers
// publish (Core.Answer). Approved calls skip the overload check: there is
// no caller left to answer OVERLOADED. A decision is finished within
// Config.FinishTimeout even when the approver's request ends first.
//
// A call presented with an approval token is checked before the decision
// (VerifyToken: the dispatchers hold keys, the caller holds "confirm",
// the MAC is right), then Decide checks the token's binding against the
// call (the same tenant, agent, session, tool, spec version and canonical
// arguments, not expired). A covered call is the parked call it approves
// (Redeem): it takes that call's id, the record is approved by the
// caller's own confirmation (the same compare-and-set, so a token is used
// once, and a token and an approver never both run the call), its nonce
// consumed, and the call — the one presented, with its own fresh
// deadlines and the same answers to an input round as the parked one —
// published and answered under that id. Any failing check refuses the
// call CONFIRMATION_REQUIRED (recorded under the id admission minted;
// nothing parked or queued). A token is never stored, published or
// logged.
//
// Every replica sweeps (Config.Sweep, 2s) the records its tracker says
// are due: a pending record past Config.TTL (24h) is expired
// (compare-and-set; an APPROVAL_EXPIRED event and an EXPIRED answer), and
// a decision its replica left unfinished (stopped between the
// compare-and-set and the publish) is finished 5s after it was made: the
// approved call published (the message id makes a double publish within
// the calls stream's duplicate window harmless), the denied or expired
// call answered. An approved call still unpublished when the window is
// nearly over is answered UNKNOWN_OUTCOME rather than published blind
// (sweep.go). Events of a decision carry message ids, so a decision
// finished twice is recorded once. Cancel of a parked call ends it at
// once (CancelParked): its approval is denied by the cancelling agent and
// the call answered CANCELLED (nothing ran).
//
// # Decisions on approvals
//
// Where the issue was silent:
//
//   - An asked call is parked after its idempotency key is claimed, so a
//     repeat of the key is the same parked call (answered
//     AWAITING_APPROVAL), and never parks twice.
//   - A token redeems the parked call it was issued with (its id) rather
//     than admitting a second call, so an approver and a token race for
//     one record, and the audit shows one approval with its decider.
//   - A full or unreachable approvals bucket answers OVERLOADED
//     (retryable): the call was never parked, so there is no approval id
//     to give; it is never published.
//   - The binding of an approved call expires with the call (its
//     schedule-to-close deadline), or Config.TTL after the approval when
//     it has none: a retry after that is refused by the worker.
//   - An approver may approve its own call: separation of duties is a
//     matter of who holds the "approve" scope.
//   - A parked call's AWAITING_APPROVAL answer counts in the admission
//     metrics as awaiting_approval, not accepted.
package approvalflow
