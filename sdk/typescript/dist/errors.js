// Errors of the toolwire client.
//
// Two kinds of failure are kept apart, as in the Go and Python clients:
//
// - A tool error is an answer: the call reached the fabric and its terminal
//   response says it failed (refused at admission: VALIDATION,
//   PERMISSION_DENIED, RATE_LIMIT, ...; or failed in a worker: TIMEOUT,
//   TRANSIENT, CANCELLED, ...). It is a ToolError subclass chosen by the
//   envelope's error type, carrying its retryability, partial side effects
//   and retryAfter. Result.error holds it; Result.throwIfError() throws it.
// - A transport error (TransportError) means there is no answer: the
//   dispatcher could not be reached, refused the credentials, or the
//   request timed out. Whether a call was admitted is then unknown; give
//   calls an idempotency key to retry them safely.
//
// A call with no terminal response yet throws a StateError (PendingError or
// UnknownCallError); a call parked for an approver throws
// ApprovalRequiredError. An aborted request rejects with the AbortSignal's
// reason, as fetch does.
/** Base class of every error this package throws. */
export class ToolwireError extends Error {
    name = "ToolwireError";
}
/**
 * No answer: the request failed below the tool call. `code` is the Connect
 * error code in snake case ("unavailable", "unauthenticated",
 * "deadline_exceeded", "permission_denied", "not_found", ...).
 */
export class TransportError extends ToolwireError {
    op;
    code;
    rawMessage;
    details;
    name = "TransportError";
    constructor(op, code, rawMessage, details = []) {
        super(`toolwire: ${op}: ${code}: ${rawMessage}`);
        this.op = op;
        this.code = code;
        this.rawMessage = rawMessage;
        this.details = details;
    }
}
/** The call has no terminal response to return (pending or unknown). */
export class StateError extends ToolwireError {
    callId;
    unconfirmed;
    name = "StateError";
    /** "PENDING" or "UNKNOWN". */
    state = "UNSPECIFIED";
    constructor(callId, 
    /**
     * Set with PENDING when the calls stream had not acknowledged the call
     * yet: it may run; do not submit it again without the same idempotency key.
     */
    unconfirmed = false, state = "UNSPECIFIED") {
        super(`toolwire: call ${callId} is ${state.toLowerCase()}`);
        this.callId = callId;
        this.unconfirmed = unconfirmed;
        this.state = state;
    }
}
/** Accepted, no terminal response yet; fetch it with getResult. */
export class PendingError extends StateError {
    name = "PendingError";
    constructor(callId, unconfirmed = false) {
        super(callId, unconfirmed, "PENDING");
    }
}
/** No call of this id in the caller's tenant (or its records are gone). */
export class UnknownCallError extends StateError {
    name = "UnknownCallError";
    constructor(callId) {
        super(callId, false, "UNKNOWN");
    }
}
/**
 * The stream ended before the call's terminal event and resuming it failed
 * as many times as allowed. The call itself is unaffected.
 */
export class WatchEndedError extends ToolwireError {
    callId;
    cause;
    name = "WatchEndedError";
    constructor(callId, cause) {
        super(`toolwire: watch ${callId} ended before the call finished` + (cause ? `: ${String(cause)}` : ""));
        this.callId = callId;
        this.cause = cause;
    }
}
/**
 * A tool call's failure as its terminal response reports it.
 *
 * - type: the short error type, e.g. "VALIDATION", "RATE_LIMIT".
 * - retryable: the same call may succeed later; never for errors raised
 *   before execution.
 * - sideEffects: "NONE", "POSSIBLE" or "UNKNOWN": what the failed call may
 *   have changed.
 * - retryAfter: seconds until the earliest sensible retry (RATE_LIMIT,
 *   BUDGET_EXCEEDED, OVERLOADED), or undefined.
 */
export class ToolError extends ToolwireError {
    name = "ToolError";
    static errorType = "UNSPECIFIED";
    type;
    rawMessage;
    retryable;
    sideEffects;
    suggestion;
    retryAfter;
    violations;
    callId;
    tool;
    constructor(init = {}) {
        const type = init.type ?? new.target.errorType;
        super(`toolwire: ${init.tool ? init.tool + ": " : ""}${type}${init.message ? ": " + init.message : ""}`);
        this.name = new.target.name;
        this.type = type;
        this.rawMessage = init.message ?? "";
        this.retryable = init.retryable ?? false;
        this.sideEffects = init.sideEffects ?? "UNSPECIFIED";
        this.suggestion = init.suggestion ?? "";
        this.retryAfter = init.retryAfter;
        this.violations = init.violations ?? [];
        this.callId = init.callId ?? "";
        this.tool = init.tool ?? "";
    }
}
function kind(errorType) {
    return class extends ToolError {
        static errorType = errorType;
    };
}
export class ValidationError extends kind("VALIDATION") {
}
export class NotFoundError extends kind("NOT_FOUND") {
}
export class PermissionDeniedError extends kind("PERMISSION_DENIED") {
}
/**
 * CONFIRMATION_REQUIRED: the call waits for an approval, or the approval
 * token it presented does not cover it.
 */
export class ConfirmationRequiredError extends kind("CONFIRMATION_REQUIRED") {
}
export class ModeRestrictedError extends kind("MODE_RESTRICTED") {
}
export class BudgetExceededError extends kind("BUDGET_EXCEEDED") {
}
export class RateLimitError extends kind("RATE_LIMIT") {
}
export class OverloadedError extends kind("OVERLOADED") {
}
export class ConflictError extends kind("CONFLICT") {
}
export class SessionInactiveError extends kind("SESSION_INACTIVE") {
}
export class AuthError extends kind("AUTH") {
}
export class ToolTimeoutError extends kind("TIMEOUT") {
}
export class ExpiredError extends kind("EXPIRED") {
}
export class CallCancelledError extends kind("CANCELLED") {
}
export class TransientError extends kind("TRANSIENT") {
}
export class PermanentError extends kind("PERMANENT") {
}
export class MaxAttemptsError extends kind("MAX_ATTEMPTS") {
}
export class UnknownOutcomeError extends kind("UNKNOWN_OUTCOME") {
}
export class InternalError extends kind("INTERNAL") {
}
/**
 * The policy asked for approval and the call is parked for an approver.
 * `approvalId` (the call's id) is what an approver approves; `token` is set
 * for a caller with the "confirm" scope when the dispatchers hold token
 * keys: after the orchestrator's own user confirmed, the same call sent
 * again with `approvalToken: token` runs as the parked one, once.
 */
export class ApprovalRequiredError extends ConfirmationRequiredError {
    approvalId;
    token;
    expiresAt;
    constructor(init, approvalId, token, expiresAt) {
        super(init);
        this.approvalId = approvalId;
        this.token = token;
        this.expiresAt = expiresAt;
    }
    /** Why the policy asked (the rule's reason). */
    get reason() {
        return this.rawMessage;
    }
}
const byType = new Map([
    ValidationError, NotFoundError, PermissionDeniedError, ConfirmationRequiredError, ModeRestrictedError,
    BudgetExceededError, RateLimitError, OverloadedError, ConflictError, SessionInactiveError, AuthError,
    ToolTimeoutError, ExpiredError, CallCancelledError, TransientError, PermanentError, MaxAttemptsError,
    UnknownOutcomeError, InternalError,
].map((c) => [c.errorType, c]));
/** The ToolError subclass of a short error type; ToolError for one this version does not know. */
export function toolErrorClass(errorType) {
    return byType.get(errorType) ?? ToolError;
}
