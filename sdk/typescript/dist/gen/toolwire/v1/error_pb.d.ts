import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/error.proto.
 */
export declare const file_toolwire_v1_error: GenFile;
/**
 * ToolError is the failure part of a ToolResponse.
 *
 * @generated from message toolwire.v1.ToolError
 */
export type ToolError = Message<"toolwire.v1.ToolError"> & {
    /**
     * @generated from field: toolwire.v1.ErrorType type = 1;
     */
    type: ErrorType;
    /**
     * @generated from field: string message = 2;
     */
    message: string;
    /**
     * @generated from field: bool retryable = 3;
     */
    retryable: boolean;
    /**
     * @generated from field: toolwire.v1.PartialSideEffects partial_side_effects = 4;
     */
    partialSideEffects: PartialSideEffects;
    /**
     * What the model or caller could do instead.
     *
     * @generated from field: string suggestion = 5;
     */
    suggestion: string;
    /**
     * Earliest sensible retry, for RATE_LIMIT and OVERLOADED.
     *
     * @generated from field: google.protobuf.Duration retry_after = 6;
     */
    retryAfter?: Duration | undefined;
    /**
     * Field-level problems of a VALIDATION error.
     *
     * @generated from field: repeated toolwire.v1.FieldViolation violations = 7;
     */
    violations: FieldViolation[];
    /**
     * For CONFIRMATION_REQUIRED: the approval to ask for (or the token to
     * send back).
     *
     * @generated from field: toolwire.v1.ApprovalRequired approval = 8;
     */
    approval?: ApprovalRequired | undefined;
};
/**
 * Describes the message toolwire.v1.ToolError.
 * Use `create(ToolErrorSchema)` to create a new message.
 */
export declare const ToolErrorSchema: GenMessage<ToolError>;
/**
 * FieldViolation names one offending field of the arguments.
 *
 * @generated from message toolwire.v1.FieldViolation
 */
export type FieldViolation = Message<"toolwire.v1.FieldViolation"> & {
    /**
     * JSON Pointer into the arguments (`/items/0/name`); empty = the root.
     *
     * @generated from field: string field = 1;
     */
    field: string;
    /**
     * @generated from field: string message = 2;
     */
    message: string;
};
/**
 * Describes the message toolwire.v1.FieldViolation.
 * Use `create(FieldViolationSchema)` to create a new message.
 */
export declare const FieldViolationSchema: GenMessage<FieldViolation>;
/**
 * ApprovalRequired is what a CONFIRMATION_REQUIRED error carries.
 *
 * @generated from message toolwire.v1.ApprovalRequired
 */
export type ApprovalRequired = Message<"toolwire.v1.ApprovalRequired"> & {
    /**
     * The parked call's approval; an approver approves it by this id.
     *
     * @generated from field: string approval_id = 1;
     */
    approvalId: string;
    /**
     * Signed token that binds this exact call (caller, tool@version,
     * arguments), for orchestrators that confirm with their own user and
     * send the same call again with it; set only when the dispatchers hold
     * token keys and the caller has the "confirm" scope.
     *
     * @generated from field: string token = 2;
     */
    token: string;
    /**
     * @generated from field: google.protobuf.Timestamp expires_at = 3;
     */
    expiresAt?: Timestamp | undefined;
};
/**
 * Describes the message toolwire.v1.ApprovalRequired.
 * Use `create(ApprovalRequiredSchema)` to create a new message.
 */
export declare const ApprovalRequiredSchema: GenMessage<ApprovalRequired>;
/**
 * ErrorType classifies every failure a caller can see. Errors raised before
 * execution always carry retryable=false and partial_side_effects=NONE.
 *
 * @generated from enum toolwire.v1.ErrorType
 */
export declare enum ErrorType {
    /**
     * @generated from enum value: ERROR_TYPE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Arguments or call malformed; the message names the offending field.
     *
     * @generated from enum value: ERROR_TYPE_VALIDATION = 1;
     */
    VALIDATION = 1,
    /**
     * Unknown tool, tool version or call.
     *
     * @generated from enum value: ERROR_TYPE_NOT_FOUND = 2;
     */
    NOT_FOUND = 2,
    /**
     * @generated from enum value: ERROR_TYPE_PERMISSION_DENIED = 3;
     */
    PERMISSION_DENIED = 3,
    /**
     * The call waits for an approval (error.approval says which), or the
     * approval it presented does not cover it.
     *
     * @generated from enum value: ERROR_TYPE_CONFIRMATION_REQUIRED = 4;
     */
    CONFIRMATION_REQUIRED = 4,
    /**
     * The session's mode forbids the tool.
     *
     * @generated from enum value: ERROR_TYPE_MODE_RESTRICTED = 5;
     */
    MODE_RESTRICTED = 5,
    /**
     * @generated from enum value: ERROR_TYPE_BUDGET_EXCEEDED = 6;
     */
    BUDGET_EXCEEDED = 6,
    /**
     * Retry after retry_after.
     *
     * @generated from enum value: ERROR_TYPE_RATE_LIMIT = 7;
     */
    RATE_LIMIT = 7,
    /**
     * The fabric is full; retry later.
     *
     * @generated from enum value: ERROR_TYPE_OVERLOADED = 8;
     */
    OVERLOADED = 8,
    /**
     * Same idempotency key with different arguments, or a state conflict.
     *
     * @generated from enum value: ERROR_TYPE_CONFLICT = 9;
     */
    CONFLICT = 9,
    /**
     * @generated from enum value: ERROR_TYPE_SESSION_INACTIVE = 10;
     */
    SESSION_INACTIVE = 10,
    /**
     * Credentials of the tool's backend rejected.
     *
     * @generated from enum value: ERROR_TYPE_AUTH = 11;
     */
    AUTH = 11,
    /**
     * An attempt or the whole call ran out of time.
     *
     * @generated from enum value: ERROR_TYPE_TIMEOUT = 12;
     */
    TIMEOUT = 12,
    /**
     * The call waited in the queue past schedule-to-start and never ran.
     *
     * @generated from enum value: ERROR_TYPE_EXPIRED = 13;
     */
    EXPIRED = 13,
    /**
     * @generated from enum value: ERROR_TYPE_CANCELLED = 14;
     */
    CANCELLED = 14,
    /**
     * Temporary failure; may succeed on retry.
     *
     * @generated from enum value: ERROR_TYPE_TRANSIENT = 15;
     */
    TRANSIENT = 15,
    /**
     * Will fail again with the same arguments.
     *
     * @generated from enum value: ERROR_TYPE_PERMANENT = 16;
     */
    PERMANENT = 16,
    /**
     * Every allowed attempt failed.
     *
     * @generated from enum value: ERROR_TYPE_MAX_ATTEMPTS = 17;
     */
    MAX_ATTEMPTS = 17,
    /**
     * An attempt started and may have had effects, but no result is known.
     *
     * @generated from enum value: ERROR_TYPE_UNKNOWN_OUTCOME = 18;
     */
    UNKNOWN_OUTCOME = 18,
    /**
     * A bug in toolwire or the tool (panic, invalid output).
     *
     * @generated from enum value: ERROR_TYPE_INTERNAL = 19;
     */
    INTERNAL = 19
}
/**
 * Describes the enum toolwire.v1.ErrorType.
 */
export declare const ErrorTypeSchema: GenEnum<ErrorType>;
/**
 * PartialSideEffects says what a failed call may have changed.
 *
 * @generated from enum toolwire.v1.PartialSideEffects
 */
export declare enum PartialSideEffects {
    /**
     * @generated from enum value: PARTIAL_SIDE_EFFECTS_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: PARTIAL_SIDE_EFFECTS_NONE = 1;
     */
    NONE = 1,
    /**
     * @generated from enum value: PARTIAL_SIDE_EFFECTS_POSSIBLE = 2;
     */
    POSSIBLE = 2,
    /**
     * @generated from enum value: PARTIAL_SIDE_EFFECTS_UNKNOWN = 3;
     */
    UNKNOWN = 3
}
/**
 * Describes the enum toolwire.v1.PartialSideEffects.
 */
export declare const PartialSideEffectsSchema: GenEnum<PartialSideEffects>;
