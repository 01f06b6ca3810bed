/** Base class of every error this package throws. */
export declare class ToolwireError extends Error {
    name: string;
}
/**
 * No answer: the request failed below the tool call. `code` is the Connect
 * error code in snake case ("unavailable", "unauthenticated",
 * "deadline_exceeded", "permission_denied", "not_found", ...).
 */
export declare class TransportError extends ToolwireError {
    readonly op: string;
    readonly code: string;
    readonly rawMessage: string;
    readonly details: unknown[];
    name: string;
    constructor(op: string, code: string, rawMessage: string, details?: unknown[]);
}
/** The call has no terminal response to return (pending or unknown). */
export declare class StateError extends ToolwireError {
    readonly callId: string;
    /**
     * Set with PENDING when the calls stream had not acknowledged the call
     * yet: it may run; do not submit it again without the same idempotency key.
     */
    readonly unconfirmed: boolean;
    name: string;
    /** "PENDING" or "UNKNOWN". */
    readonly state: string;
    constructor(callId: string, 
    /**
     * Set with PENDING when the calls stream had not acknowledged the call
     * yet: it may run; do not submit it again without the same idempotency key.
     */
    unconfirmed?: boolean, state?: string);
}
/** Accepted, no terminal response yet; fetch it with getResult. */
export declare class PendingError extends StateError {
    name: string;
    constructor(callId: string, unconfirmed?: boolean);
}
/** No call of this id in the caller's tenant (or its records are gone). */
export declare class UnknownCallError extends StateError {
    name: string;
    constructor(callId: string);
}
/**
 * The stream ended before the call's terminal event and resuming it failed
 * as many times as allowed. The call itself is unaffected.
 */
export declare class WatchEndedError extends ToolwireError {
    readonly callId: string;
    readonly cause?: unknown | undefined;
    name: string;
    constructor(callId: string, cause?: unknown | undefined);
}
/** One offending field of a VALIDATION error: a JSON Pointer and why. */
export interface FieldViolation {
    field: string;
    message: string;
}
/** What a ToolError is built from (the envelope's error, decoded). */
export interface ToolErrorInit {
    type?: string;
    message?: string;
    retryable?: boolean;
    sideEffects?: string;
    suggestion?: string;
    retryAfter?: number;
    violations?: FieldViolation[];
    callId?: string;
    tool?: string;
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
export declare class ToolError extends ToolwireError {
    name: string;
    static readonly errorType: string;
    readonly type: string;
    readonly rawMessage: string;
    readonly retryable: boolean;
    readonly sideEffects: string;
    readonly suggestion: string;
    readonly retryAfter: number | undefined;
    readonly violations: FieldViolation[];
    readonly callId: string;
    readonly tool: string;
    constructor(init?: ToolErrorInit);
}
declare const ValidationError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class ValidationError extends ValidationError_base {
}
declare const NotFoundError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class NotFoundError extends NotFoundError_base {
}
declare const PermissionDeniedError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class PermissionDeniedError extends PermissionDeniedError_base {
}
declare const ConfirmationRequiredError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
/**
 * CONFIRMATION_REQUIRED: the call waits for an approval, or the approval
 * token it presented does not cover it.
 */
export declare class ConfirmationRequiredError extends ConfirmationRequiredError_base {
}
declare const ModeRestrictedError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class ModeRestrictedError extends ModeRestrictedError_base {
}
declare const BudgetExceededError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class BudgetExceededError extends BudgetExceededError_base {
}
declare const RateLimitError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class RateLimitError extends RateLimitError_base {
}
declare const OverloadedError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class OverloadedError extends OverloadedError_base {
}
declare const ConflictError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class ConflictError extends ConflictError_base {
}
declare const SessionInactiveError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class SessionInactiveError extends SessionInactiveError_base {
}
declare const AuthError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class AuthError extends AuthError_base {
}
declare const ToolTimeoutError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class ToolTimeoutError extends ToolTimeoutError_base {
}
declare const ExpiredError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class ExpiredError extends ExpiredError_base {
}
declare const CallCancelledError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class CallCancelledError extends CallCancelledError_base {
}
declare const TransientError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class TransientError extends TransientError_base {
}
declare const PermanentError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class PermanentError extends PermanentError_base {
}
declare const MaxAttemptsError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class MaxAttemptsError extends MaxAttemptsError_base {
}
declare const UnknownOutcomeError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class UnknownOutcomeError extends UnknownOutcomeError_base {
}
declare const InternalError_base: {
    new (init?: ToolErrorInit): {
        name: string;
        readonly type: string;
        readonly rawMessage: string;
        readonly retryable: boolean;
        readonly sideEffects: string;
        readonly suggestion: string;
        readonly retryAfter: number | undefined;
        readonly violations: FieldViolation[];
        readonly callId: string;
        readonly tool: string;
        message: string;
        stack?: string;
        cause?: unknown;
    };
    readonly errorType: string;
    captureStackTrace(targetObject: object, constructorOpt?: Function): void;
    prepareStackTrace(err: Error, stackTraces: NodeJS.CallSite[]): any;
    stackTraceLimit: number;
};
export declare class InternalError extends InternalError_base {
}
/**
 * The policy asked for approval and the call is parked for an approver.
 * `approvalId` (the call's id) is what an approver approves; `token` is set
 * for a caller with the "confirm" scope when the dispatchers hold token
 * keys: after the orchestrator's own user confirmed, the same call sent
 * again with `approvalToken: token` runs as the parked one, once.
 */
export declare class ApprovalRequiredError extends ConfirmationRequiredError {
    readonly approvalId: string;
    readonly token: string;
    readonly expiresAt: Date | undefined;
    constructor(init: ToolErrorInit, approvalId: string, token: string, expiresAt: Date | undefined);
    /** Why the policy asked (the rule's reason). */
    get reason(): string;
}
/** The ToolError subclass of a short error type; ToolError for one this version does not know. */
export declare function toolErrorClass(errorType: string): new (init: ToolErrorInit) => ToolError;
export {};
