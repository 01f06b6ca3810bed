import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { ApprovalRequiredError, ToolError } from "./errors.js";
import type * as pb from "./gen/toolwire/v1/dispatcher_pb.js";
import { type CallEvent as PbCallEvent } from "./gen/toolwire/v1/event_pb.js";
import { type ToolError as PbToolError } from "./gen/toolwire/v1/error_pb.js";
import type { Content as PbContent } from "./gen/toolwire/v1/content_pb.js";
import type { ToolResponse } from "./gen/toolwire/v1/response_pb.js";
import { type Approval as PbApproval, type Grant as PbGrant } from "./gen/toolwire/v1/policy_pb.js";
import { type ToolSpec as PbToolSpec } from "./gen/toolwire/v1/spec_pb.js";
/** A protobuf Duration as seconds; undefined when unset. */
export declare function seconds(d: Duration | undefined): number | undefined;
/** A protobuf Timestamp as a Date; undefined when unset. */
export declare function date(t: Timestamp | undefined): Date | undefined;
/** JSON text decoded; undefined when empty or not JSON. */
export declare function jsonText(s: string): unknown;
/** The typed ToolError of an envelope's error object. */
export declare function toolError(e: PbToolError, callId?: string, tool?: string): ToolError;
/** One content block: kind is "text", "image", "audio", "resource_link" or "resource" (MCP's kinds). */
export interface Content {
    kind: "text" | "image" | "audio" | "resource_link" | "resource" | "unknown";
    text: string;
    data: Uint8Array;
    mimeType: string;
    uri: string;
    name: string;
    raw: PbContent;
}
export declare function content(c: PbContent): Content;
/** A state change the tool asks the orchestrator to make. */
export interface Intent {
    id: string;
    type: string;
    payloadJson: string;
    payload: unknown;
}
/** How a response was produced. */
export interface ResponseMeta {
    worker: string;
    attempt: number;
    /** "worker", "dispatcher", ... */
    source: string;
    specVersion: string;
    session: string;
    /** Seconds the attempt ran. */
    duration: number | undefined;
    truncated: boolean;
    cancelledBy: string;
    cancelReason: string;
    loopCount: number;
}
/**
 * A call's terminal response (the envelope), which may be a tool error:
 * `ok` is false when `error` holds the typed ToolError; throwIfError()
 * throws it. `text` joins the text blocks.
 */
export declare class Result {
    readonly raw: ToolResponse | undefined;
    readonly callId: string;
    readonly ok: boolean;
    readonly tool: string;
    readonly content: Content[];
    readonly structuredJson: string;
    readonly structured: unknown;
    readonly error: ToolError | undefined;
    readonly intents: Intent[];
    readonly meta: ResponseMeta;
    /** The session after applying the intents (applyIntents: true). */
    session: Session | undefined;
    /** Why the intents could not be applied (applyIntents: true). */
    applyError: string;
    constructor(callId: string, raw: ToolResponse | undefined, rejection?: ToolError);
    /** The text blocks joined by newlines (the structured JSON when there is none; the error's message for a failed call). */
    get text(): string;
    /** Throw the call's ToolError, if it failed; return this otherwise. */
    throwIfError(): this;
}
/** What submit answered. */
export interface Submission {
    callId: string;
    /** The idempotency key matched an earlier call; nothing new was queued. */
    duplicate: boolean;
    /** The calls stream had not yet acknowledged the call (it may run). */
    unconfirmed: boolean;
    /** The terminal response, when refused at admission or a duplicate of a finished call. */
    result: Result | undefined;
    /** Set when the call is parked for an approver. */
    approval: ApprovalRequiredError | undefined;
    /** "PENDING", "DONE", "AWAITING_APPROVAL". */
    state: string;
    raw: pb.SubmitResponse;
}
/**
 * A lifecycle or progress event of a call (what watch yields). `type` is
 * "ACCEPTED", "STARTED", "PROGRESS", "RETRYING", "CANCEL_REQUESTED",
 * "FINISHED", "REJECTED", "AWAITING_APPROVAL", "APPROVED",
 * "APPROVAL_DENIED", "APPROVAL_EXPIRED" or "LATENCY_BUDGET_EXCEEDED".
 */
export declare class CallEvent {
    readonly raw: PbCallEvent;
    readonly callId: string;
    readonly type: string;
    readonly time: Date | undefined;
    readonly attempt: number;
    readonly worker: string;
    readonly message: string;
    readonly percent: number | undefined;
    readonly partial: Content[];
    readonly error: ToolError | undefined;
    readonly retryDelay: number | undefined;
    readonly tool: string;
    /** The terminal response, on FINISHED (the rejection, on REJECTED). */
    readonly result: Result | undefined;
    constructor(raw: PbCallEvent);
    /** FINISHED or REJECTED: the last event of a call. */
    get terminal(): boolean;
    /**
     * Identifies the event among its call's events (watch resumes by it). A
     * call has one terminal event, which the dispatcher may build anew (with
     * a new time) for each watch: its key is its type.
     */
    key(): string;
}
/** An intent the reference applier applied, or refused (refused says why). */
export interface AppliedIntent {
    callId: string;
    intentId: string;
    type: string;
    payloadJson: string;
    refused: string;
    appliedAt: Date | undefined;
}
export declare function appliedIntent(a: pb.AppliedIntent): AppliedIntent;
/** The state the dispatcher's reference applier keeps for a session. */
export interface Session {
    session: string;
    tenant: string;
    /** SET_STATE values by key, decoded from JSON. */
    state: Record<string, unknown>;
    ended: boolean;
    endReason: string;
    suppressAudio: boolean;
    suppressTranscript: boolean;
    pendingMessage: string;
    mode: string;
    revision: bigint;
    pinnedVersions: Record<string, string>;
    log: AppliedIntent[];
    updatedAt: Date | undefined;
    raw: pb.Session;
}
export declare function session(s: pb.Session): Session;
/** What applyIntents did: intents applied now, skipped (applied before) and refused (each with its reason). */
export interface ApplyIntentsResult {
    session: Session;
    applied: number;
    skipped: number;
    refused: AppliedIntent[];
}
/** A parked call's approval. state: PENDING, APPROVED, DENIED, EXPIRED. */
export interface Approval {
    id: string;
    state: string;
    tool: string;
    specVersion: string;
    argumentsJson: string;
    arguments: unknown;
    agent: string;
    session: string;
    reason: string;
    approver: string;
    scope: string;
    grantId: string;
    createdAt: Date | undefined;
    expiresAt: Date | undefined;
    decidedAt: Date | undefined;
    raw: PbApproval;
}
export declare function approval(a: PbApproval): Approval;
/** A standing grant an approval made for a session, agent or tenant. */
export interface Grant {
    id: string;
    layer: string;
    agent: string;
    session: string;
    tool: string;
    args: Record<string, string>;
    expiresAt: Date | undefined;
    approvalId: string;
    approver: string;
    raw: PbGrant;
}
export declare function grant(g: PbGrant): Grant;
/** What approve answered: the approval, and the grant for a session, agent or tenant scope. */
export interface ApproveResult {
    approval: Approval;
    grant: Grant | undefined;
}
/** A tool as the registry describes it (the native format). */
export interface ToolSpec {
    name: string;
    title: string;
    description: string;
    summary: string;
    version: string;
    executor: string;
    category: string;
    inputSchema: unknown;
    outputSchema: unknown;
    scopes: string[];
    intents: string[];
    requiresApproval: boolean;
    annotations: {
        readOnly?: boolean;
        destructive?: boolean;
        idempotent?: boolean;
        openWorld?: boolean;
    };
    raw: PbToolSpec;
}
export declare function toolSpec(t: PbToolSpec): ToolSpec;
/** One limit of the policy in force, as it stands for one key. */
export interface LimitUsage {
    limit: string;
    key: string;
    value: string;
    reason: string;
    rateCount: number;
    /** Seconds. */
    ratePer: number | undefined;
    rateBurst: number;
    concurrency: number;
    inFlight: number;
    budgetUnits: number;
    /** Seconds. */
    budgetWindow: number | undefined;
    used: number;
    remaining: number;
    resetAt: Date | undefined;
    raw: pb.LimitUsage;
}
export declare function limitUsage(u: pb.LimitUsage): LimitUsage;
/** The limits in force for a key, and the policy version they are from. */
export interface Usage {
    limits: LimitUsage[];
    policyVersion: string;
}
