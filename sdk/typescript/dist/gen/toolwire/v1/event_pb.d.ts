import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { Caller, ToolCall } from "./call_pb.js";
import type { Content } from "./content_pb.js";
import type { ToolError } from "./error_pb.js";
import type { Approval, PolicyDecision } from "./policy_pb.js";
import type { LatencyBudgetExceeded, ToolResponse } from "./response_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/event.proto.
 */
export declare const file_toolwire_v1_event: GenFile;
/**
 * CallEvent is published on `<prefix>.event.<tenant>.<dispatcher>.<call_id>`
 * and streamed by Watch.
 *
 * @generated from message toolwire.v1.CallEvent
 */
export type CallEvent = Message<"toolwire.v1.CallEvent"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: toolwire.v1.CallEventType type = 2;
     */
    type: CallEventType;
    /**
     * @generated from field: google.protobuf.Timestamp time = 3;
     */
    time?: Timestamp | undefined;
    /**
     * @generated from field: int32 attempt = 4;
     */
    attempt: number;
    /**
     * @generated from field: string worker = 5;
     */
    worker: string;
    /**
     * Progress message, or the reason of a cancel or retry.
     *
     * @generated from field: string message = 6;
     */
    message: string;
    /**
     * Progress in [0, 100], when known.
     *
     * @generated from field: optional double percent = 7;
     */
    percent?: number | undefined;
    /**
     * Partial output of a PROGRESS event (tool.Partial): content blocks the
     * tool sent during its attempt, before its result, which they do not
     * change.
     *
     * @generated from field: repeated toolwire.v1.Content partial = 8;
     */
    partial: Content[];
    /**
     * Error of the failed attempt (RETRYING) or of the rejection (REJECTED).
     *
     * @generated from field: toolwire.v1.ToolError error = 9;
     */
    error?: ToolError | undefined;
    /**
     * @generated from field: google.protobuf.Duration retry_delay = 10;
     */
    retryDelay?: Duration | undefined;
    /**
     * Terminal response, on FINISHED.
     *
     * @generated from field: toolwire.v1.ToolResponse response = 11;
     */
    response?: ToolResponse | undefined;
    /**
     * @generated from field: string tool = 12;
     */
    tool: string;
    /**
     * Caller of the call, on ACCEPTED and REJECTED (the admission record).
     *
     * @generated from field: toolwire.v1.Caller caller = 13;
     */
    caller?: Caller | undefined;
    /**
     * The policy decision, on ACCEPTED, REJECTED and AWAITING_APPROVAL.
     *
     * @generated from field: toolwire.v1.PolicyDecision policy = 14;
     */
    policy?: PolicyDecision | undefined;
    /**
     * The approval, on AWAITING_APPROVAL, APPROVED, APPROVAL_DENIED and
     * APPROVAL_EXPIRED.
     *
     * @generated from field: toolwire.v1.Approval approval = 15;
     */
    approval?: Approval | undefined;
    /**
     * ACCEPTED: the loop guard's count when it warned (this exact call made
     * that many times in a row in its session); 0 otherwise.
     *
     * @generated from field: int32 loop_count = 16;
     */
    loopCount: number;
    /**
     * ACCEPTED: the call's schedule-to-close deadline (ToolCall.deadline),
     * unset when it has none. The overdue sweeper answers a call that has no
     * result by then (plus a grace period).
     *
     * @generated from field: google.protobuf.Timestamp deadline = 17;
     */
    deadline?: Timestamp | undefined;
    /**
     * ACCEPTED: the spec version the call was admitted with
     * (ToolCall.spec_version), which says whether its attempts record their
     * start before they run.
     *
     * @generated from field: string spec_version = 18;
     */
    specVersion: string;
    /**
     * LATENCY_BUDGET_EXCEEDED: the budget, and how long the call took.
     *
     * @generated from field: toolwire.v1.LatencyBudgetExceeded latency_budget_exceeded = 19;
     */
    latencyBudgetExceeded?: LatencyBudgetExceeded | undefined;
    /**
     * PROGRESS with partial output: the chunk's number in its attempt, from
     * 1 (each attempt starts again at 1). Readers order and deduplicate the
     * partial output of an attempt by it; 0 on every other event.
     *
     * @generated from field: uint32 partial_seq = 20;
     */
    partialSeq: number;
};
/**
 * Describes the message toolwire.v1.CallEvent.
 * Use `create(CallEventSchema)` to create a new message.
 */
export declare const CallEventSchema: GenMessage<CallEvent>;
/**
 * DeadLetter is the record written to `<prefix>.dlq.<type>.<tenant>.<provider>.<tool>`
 * when a call is exhausted or terminated.
 *
 * @generated from message toolwire.v1.DeadLetter
 */
export type DeadLetter = Message<"toolwire.v1.DeadLetter"> & {
    /**
     * The call, when it could be decoded.
     *
     * @generated from field: toolwire.v1.ToolCall call = 1;
     */
    call?: ToolCall | undefined;
    /**
     * Raw message, when it could not.
     *
     * @generated from field: bytes raw = 2;
     */
    raw: Uint8Array;
    /**
     * Subject the call arrived on.
     *
     * @generated from field: string subject = 3;
     */
    subject: string;
    /**
     * @generated from field: string reason = 4;
     */
    reason: string;
    /**
     * @generated from field: toolwire.v1.ToolError last_error = 5;
     */
    lastError?: ToolError | undefined;
    /**
     * @generated from field: int32 attempts = 6;
     */
    attempts: number;
    /**
     * @generated from field: google.protobuf.Timestamp time = 7;
     */
    time?: Timestamp | undefined;
    /**
     * @generated from field: string worker = 8;
     */
    worker: string;
};
/**
 * Describes the message toolwire.v1.DeadLetter.
 * Use `create(DeadLetterSchema)` to create a new message.
 */
export declare const DeadLetterSchema: GenMessage<DeadLetter>;
/**
 * CallEventType is a step of a call's life.
 *
 * @generated from enum toolwire.v1.CallEventType
 */
export declare enum CallEventType {
    /**
     * @generated from enum value: CALL_EVENT_TYPE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Admitted and queued.
     *
     * @generated from enum value: CALL_EVENT_TYPE_ACCEPTED = 1;
     */
    ACCEPTED = 1,
    /**
     * An attempt started on a worker.
     *
     * @generated from enum value: CALL_EVENT_TYPE_STARTED = 2;
     */
    STARTED = 2,
    /**
     * @generated from enum value: CALL_EVENT_TYPE_PROGRESS = 3;
     */
    PROGRESS = 3,
    /**
     * An attempt failed and another follows after retry_delay.
     *
     * @generated from enum value: CALL_EVENT_TYPE_RETRYING = 4;
     */
    RETRYING = 4,
    /**
     * @generated from enum value: CALL_EVENT_TYPE_CANCEL_REQUESTED = 5;
     */
    CANCEL_REQUESTED = 5,
    /**
     * The terminal response was published.
     *
     * @generated from enum value: CALL_EVENT_TYPE_FINISHED = 6;
     */
    FINISHED = 6,
    /**
     * Refused at admission; nothing was queued.
     *
     * @generated from enum value: CALL_EVENT_TYPE_REJECTED = 7;
     */
    REJECTED = 7,
    /**
     * Parked by an ask decision until an approver decides (approval).
     *
     * @generated from enum value: CALL_EVENT_TYPE_AWAITING_APPROVAL = 8;
     */
    AWAITING_APPROVAL = 8,
    /**
     * Approved (approval); the call is published next.
     *
     * @generated from enum value: CALL_EVENT_TYPE_APPROVED = 9;
     */
    APPROVED = 9,
    /**
     * Denied by an approver (approval); FINISHED follows with
     * PERMISSION_DENIED.
     *
     * @generated from enum value: CALL_EVENT_TYPE_APPROVAL_DENIED = 10;
     */
    APPROVAL_DENIED = 10,
    /**
     * Not decided in time; FINISHED follows with EXPIRED.
     *
     * @generated from enum value: CALL_EVENT_TYPE_APPROVAL_EXPIRED = 11;
     */
    APPROVAL_EXPIRED = 11,
    /**
     * The call's result came after its soft latency budget
     * (latency_budget_exceeded says by how much); recorded by the
     * dispatcher that admitted it, after the result. Never a failure.
     *
     * @generated from enum value: CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED = 12;
     */
    LATENCY_BUDGET_EXCEEDED = 12,
    /**
     * The call's dead letter was purged from the DLQ (the message names
     * who purged it and the letter's sequence); recorded by the dispatcher
     * that purged it, after the result. The call's own record (its call,
     * events and result) is kept: only the dead letter is gone, so it can
     * no longer be retried from the DLQ (replay reads the call).
     *
     * @generated from enum value: CALL_EVENT_TYPE_DEAD_LETTER_PURGED = 13;
     */
    DEAD_LETTER_PURGED = 13
}
/**
 * Describes the enum toolwire.v1.CallEventType.
 */
export declare const CallEventTypeSchema: GenEnum<CallEventType>;
