// Package policy holds the decisions about whether a call may run that go
// beyond its tool's spec and schema. Both sides ask it the same question:
// the dispatcher at admission, and the worker again before executing,
// since a call can reach a pool without passing a dispatcher (a raw NATS
// publish).
//
// # Approval
//
// A tool whose spec says requires_approval runs only when an approval
// covers the exact call. The approval flow (parked calls, approvers,
// grants, signed tokens bound to tenant, agent, session, tool@version and
// the SHA-256 of the canonical arguments) is not built yet, so nothing
// covers a call: ApprovalCovers is false for every call whatever its
// approval_token says, and CheckApproval refuses every call to such a
// tool with CONFIRMATION_REQUIRED (not retryable, no side effects). The
// approval flow plugs in at ApprovalCovers and nowhere else. This is the
// production decision until then: a tool that requires approval fails
// closed, it never runs.
package policy
