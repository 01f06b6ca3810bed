import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { ErrorType } from "./error_pb.js";
import type { CallEvent } from "./event_pb.js";
import type { Approval, ApprovalScope, ApprovalState, Grant, PolicyDecision, PolicyVersion } from "./policy_pb.js";
import type { ToolResponse } from "./response_pb.js";
import type { ExecutorType, ToolCategory, ToolSpec } from "./spec_pb.js";
import type { JsonObject, Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/dispatcher.proto.
 */
export declare const file_toolwire_v1_dispatcher: GenFile;
/**
 * CallRequest submits a call and waits for its terminal response. The
 * fields are flat so that a JSON client sends
 * `{"tool":"echo","arguments":{"text":"hi"}}`.
 *
 * @generated from message toolwire.v1.CallRequest
 */
export type CallRequest = Message<"toolwire.v1.CallRequest"> & {
    /**
     * @generated from field: string tool = 1;
     */
    tool: string;
    /**
     * Arguments as a JSON object. Numbers pass through float64 here; use
     * arguments_json for exact big integers.
     *
     * @generated from field: google.protobuf.Struct arguments = 2;
     */
    arguments?: JsonObject | undefined;
    /**
     * Arguments as the raw JSON string an LLM emitted; reaches the tool byte
     * for byte. Takes precedence over `arguments` when both are set.
     *
     * @generated from field: string arguments_json = 3;
     */
    argumentsJson: string;
    /**
     * Tenant-scoped; the same key and arguments give the same call, for the
     * audit horizon. The same key with other arguments answers CONFLICT.
     *
     * @generated from field: string idempotency_key = 4;
     */
    idempotencyKey: string;
    /**
     * @generated from field: string session = 5;
     */
    session: string;
    /**
     * @generated from field: string user = 6;
     */
    user: string;
    /**
     * @generated from field: string run = 7;
     */
    run: string;
    /**
     * @generated from field: string turn = 8;
     */
    turn: string;
    /**
     * Pin a spec version; empty = the current one.
     *
     * @generated from field: string spec_version = 9;
     */
    specVersion: string;
    /**
     * Only tighten the tool's own timeouts.
     *
     * @generated from field: google.protobuf.Duration schedule_to_start = 10;
     */
    scheduleToStart?: Duration | undefined;
    /**
     * @generated from field: google.protobuf.Duration schedule_to_close = 11;
     */
    scheduleToClose?: Duration | undefined;
    /**
     * @generated from field: string approval_token = 12;
     */
    approvalToken: string;
    /**
     * Longest wait for the response; default 60s. When it passes the call
     * keeps running and the answer is PENDING with the call id.
     *
     * @generated from field: google.protobuf.Duration wait = 13;
     */
    wait?: Duration | undefined;
    /**
     * Apply the response's intents to the session (the reference applier)
     * before answering; the session's state is returned in
     * CallResponse.session. Needs `session`.
     *
     * @generated from field: bool apply_intents = 14;
     */
    applyIntents: boolean;
    /**
     * When the policy asks for approval: keep waiting (up to `wait`) for the
     * approval and the call's result, instead of answering
     * CONFIRMATION_REQUIRED with the approval id at once.
     *
     * @generated from field: bool wait_for_approval = 15;
     */
    waitForApproval: boolean;
    /**
     * The call id of a response that asked for input (ToolResponse.
     * input_required): this call gives the answers, in input_responses_json,
     * with the same tool and arguments; the tool gets its state back.
     *
     * @generated from field: string continues = 16;
     */
    continues: string;
    /**
     * The answers to the requests of the call named by continues, by their
     * keys, each a JSON object as text (at most 64).
     *
     * @generated from field: map<string, string> input_responses_json = 17;
     */
    inputResponsesJson: {
        [key: string]: string;
    };
    /**
     * The client capabilities the caller declares (ToolCall.
     * client_capabilities_json).
     *
     * @generated from field: string client_capabilities_json = 18;
     */
    clientCapabilitiesJson: string;
    /**
     * Pin spec versions per session (needs `session`): the session's first
     * call of a tool pins the version it resolves (Session.pinned_versions),
     * and its later calls of that tool run that version. The policy can
     * turn it on for a tenant, agent or mode (sessions: {pin_versions:
     * true}); either turns it on.
     *
     * @generated from field: bool pin_session_versions = 19;
     */
    pinSessionVersions: boolean;
    /**
     * The call on whose behalf this one is made (docs/delegation.md): an
     * agent service that runs a sub-agent for a call names that call here.
     * It must be a call of the caller's tenant that has not finished; the
     * dispatcher records the chain in Caller (parent_call_id, root_call_id,
     * depth, parent_tool), bounds its depth, fan-out and size, and cancelling
     * the parent cancels this call. Empty = none.
     *
     * @generated from field: string parent_call_id = 20;
     */
    parentCallId: string;
    /**
     * The model the call is made for (docs/toolsets.md): the policy's
     * toolset for its family decides which tools it may call and which
     * schema variant its arguments must also satisfy. A claim, never a
     * grant. Empty = none. At most 128 bytes.
     *
     * @generated from field: string model = 21;
     */
    model: string;
};
/**
 * Describes the message toolwire.v1.CallRequest.
 * Use `create(CallRequestSchema)` to create a new message.
 */
export declare const CallRequestSchema: GenMessage<CallRequest>;
/**
 * @generated from message toolwire.v1.CallResponse
 */
export type CallResponse = Message<"toolwire.v1.CallResponse"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: toolwire.v1.CallState state = 2;
     */
    state: CallState;
    /**
     * @generated from field: toolwire.v1.ToolResponse response = 3;
     */
    response?: ToolResponse | undefined;
    /**
     * The session after applying the response's intents (apply_intents).
     *
     * @generated from field: toolwire.v1.Session session = 4;
     */
    session?: Session | undefined;
    /**
     * Why the intents could not be applied (apply_intents); the response is
     * still the call's, and ApplyIntents(call_id) can apply them later.
     *
     * @generated from field: string apply_error = 5;
     */
    applyError: string;
    /**
     * Set with PENDING when the calls stream had not acknowledged the call
     * when the dispatcher had to answer; see SubmitResponse.unconfirmed.
     *
     * @generated from field: bool unconfirmed = 6;
     */
    unconfirmed: boolean;
    /**
     * The response's intents refused when applying them (apply_intents):
     * not in the intent catalog, not declared by the tool's spec version,
     * or malformed; each with its reason. The others were applied.
     *
     * @generated from field: repeated toolwire.v1.AppliedIntent refused_intents = 7;
     */
    refusedIntents: AppliedIntent[];
};
/**
 * Describes the message toolwire.v1.CallResponse.
 * Use `create(CallResponseSchema)` to create a new message.
 */
export declare const CallResponseSchema: GenMessage<CallResponse>;
/**
 * SubmitRequest admits a call without waiting; its fields mean what they
 * mean in CallRequest.
 *
 * @generated from message toolwire.v1.SubmitRequest
 */
export type SubmitRequest = Message<"toolwire.v1.SubmitRequest"> & {
    /**
     * @generated from field: string tool = 1;
     */
    tool: string;
    /**
     * @generated from field: google.protobuf.Struct arguments = 2;
     */
    arguments?: JsonObject | undefined;
    /**
     * @generated from field: string arguments_json = 3;
     */
    argumentsJson: string;
    /**
     * @generated from field: string idempotency_key = 4;
     */
    idempotencyKey: string;
    /**
     * @generated from field: string session = 5;
     */
    session: string;
    /**
     * @generated from field: string user = 6;
     */
    user: string;
    /**
     * @generated from field: string run = 7;
     */
    run: string;
    /**
     * @generated from field: string turn = 8;
     */
    turn: string;
    /**
     * @generated from field: string spec_version = 9;
     */
    specVersion: string;
    /**
     * @generated from field: google.protobuf.Duration schedule_to_start = 10;
     */
    scheduleToStart?: Duration | undefined;
    /**
     * @generated from field: google.protobuf.Duration schedule_to_close = 11;
     */
    scheduleToClose?: Duration | undefined;
    /**
     * @generated from field: string approval_token = 12;
     */
    approvalToken: string;
    /**
     * As CallRequest's: the call a tool asked for input in, the answers, and
     * the client capabilities the caller declares.
     *
     * @generated from field: string continues = 16;
     */
    continues: string;
    /**
     * @generated from field: map<string, string> input_responses_json = 17;
     */
    inputResponsesJson: {
        [key: string]: string;
    };
    /**
     * @generated from field: string client_capabilities_json = 18;
     */
    clientCapabilitiesJson: string;
    /**
     * @generated from field: bool pin_session_versions = 19;
     */
    pinSessionVersions: boolean;
    /**
     * As CallRequest's: the call on whose behalf this one is made.
     *
     * @generated from field: string parent_call_id = 20;
     */
    parentCallId: string;
    /**
     * As CallRequest's: the model the call is made for.
     *
     * @generated from field: string model = 21;
     */
    model: string;
};
/**
 * Describes the message toolwire.v1.SubmitRequest.
 * Use `create(SubmitRequestSchema)` to create a new message.
 */
export declare const SubmitRequestSchema: GenMessage<SubmitRequest>;
/**
 * @generated from message toolwire.v1.SubmitResponse
 */
export type SubmitResponse = Message<"toolwire.v1.SubmitResponse"> & {
    /**
     * Always set; a call refused at admission has an id too, for the record.
     *
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * Set when the call was refused at admission (never queued), or when the
     * idempotency key named a call that already finished.
     *
     * @generated from field: toolwire.v1.ToolResponse response = 2;
     */
    response?: ToolResponse | undefined;
    /**
     * The idempotency key matched an earlier call.
     *
     * @generated from field: bool duplicate = 3;
     */
    duplicate: boolean;
    /**
     * PENDING when queued, DONE when `response` is terminal,
     * AWAITING_APPROVAL when parked (`response` is CONFIRMATION_REQUIRED).
     *
     * @generated from field: toolwire.v1.CallState state = 4;
     */
    state: CallState;
    /**
     * Set with PENDING when the calls stream had not acknowledged the call
     * when the dispatcher had to answer (a partition or a leader election):
     * the call may be stored and run, so it is accepted, and the dispatcher
     * goes on publishing it under its id. Do not submit it again (unless
     * with the same idempotency key): GetResult or Watch on `call_id` tell
     * what became of it — its result, or, after its schedule-to-close, an
     * answer saying whether it ran.
     *
     * @generated from field: bool unconfirmed = 5;
     */
    unconfirmed: boolean;
};
/**
 * Describes the message toolwire.v1.SubmitResponse.
 * Use `create(SubmitResponseSchema)` to create a new message.
 */
export declare const SubmitResponseSchema: GenMessage<SubmitResponse>;
/**
 * @generated from message toolwire.v1.GetResultRequest
 */
export type GetResultRequest = Message<"toolwire.v1.GetResultRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * Wait up to this long for a pending call; zero = answer at once.
     *
     * @generated from field: google.protobuf.Duration wait = 2;
     */
    wait?: Duration | undefined;
};
/**
 * Describes the message toolwire.v1.GetResultRequest.
 * Use `create(GetResultRequestSchema)` to create a new message.
 */
export declare const GetResultRequestSchema: GenMessage<GetResultRequest>;
/**
 * @generated from message toolwire.v1.GetResultResponse
 */
export type GetResultResponse = Message<"toolwire.v1.GetResultResponse"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: toolwire.v1.CallState state = 2;
     */
    state: CallState;
    /**
     * @generated from field: toolwire.v1.ToolResponse response = 3;
     */
    response?: ToolResponse | undefined;
};
/**
 * Describes the message toolwire.v1.GetResultResponse.
 * Use `create(GetResultResponseSchema)` to create a new message.
 */
export declare const GetResultResponseSchema: GenMessage<GetResultResponse>;
/**
 * @generated from message toolwire.v1.GetDelegationRequest
 */
export type GetDelegationRequest = Message<"toolwire.v1.GetDelegationRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
};
/**
 * Describes the message toolwire.v1.GetDelegationRequest.
 * Use `create(GetDelegationRequestSchema)` to create a new message.
 */
export declare const GetDelegationRequestSchema: GenMessage<GetDelegationRequest>;
/**
 * DelegatedCall is one call of a delegation chain as GetDelegation shows
 * it.
 *
 * @generated from message toolwire.v1.DelegatedCall
 */
export type DelegatedCall = Message<"toolwire.v1.DelegatedCall"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: string tool = 2;
     */
    tool: string;
    /**
     * @generated from field: toolwire.v1.CallState state = 3;
     */
    state: CallState;
    /**
     * With DONE: whether the call succeeded, and its error's type when not.
     *
     * @generated from field: bool ok = 4;
     */
    ok: boolean;
    /**
     * @generated from field: toolwire.v1.ErrorType error_type = 5;
     */
    errorType: ErrorType;
};
/**
 * Describes the message toolwire.v1.DelegatedCall.
 * Use `create(DelegatedCallSchema)` to create a new message.
 */
export declare const DelegatedCallSchema: GenMessage<DelegatedCall>;
/**
 * @generated from message toolwire.v1.GetDelegationResponse
 */
export type GetDelegationResponse = Message<"toolwire.v1.GetDelegationResponse"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * UNKNOWN for a call the caller's tenant does not hold (as GetResult).
     *
     * @generated from field: toolwire.v1.CallState state = 2;
     */
    state: CallState;
    /**
     * The call's parent first, then its parent's, up to the chain's root;
     * at most the chain's maximum depth. A call above one the caller may
     * not see (another agent's under per-agent visibility) ends the list.
     *
     * @generated from field: repeated toolwire.v1.DelegatedCall ancestors = 3;
     */
    ancestors: DelegatedCall[];
    /**
     * The call's direct children the caller may see, oldest first, at most
     * 20.
     *
     * @generated from field: repeated toolwire.v1.DelegatedCall children = 4;
     */
    children: DelegatedCall[];
    /**
     * Counts up to the rest of the children the caller may see: a child
     * whose admission is still under way, or was refused, may be counted;
     * a child the caller may not see is not.
     *
     * @generated from field: int32 more_children = 5;
     */
    moreChildren: number;
};
/**
 * Describes the message toolwire.v1.GetDelegationResponse.
 * Use `create(GetDelegationResponseSchema)` to create a new message.
 */
export declare const GetDelegationResponseSchema: GenMessage<GetDelegationResponse>;
/**
 * @generated from message toolwire.v1.WatchRequest
 */
export type WatchRequest = Message<"toolwire.v1.WatchRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
};
/**
 * Describes the message toolwire.v1.WatchRequest.
 * Use `create(WatchRequestSchema)` to create a new message.
 */
export declare const WatchRequestSchema: GenMessage<WatchRequest>;
/**
 * @generated from message toolwire.v1.WatchResponse
 */
export type WatchResponse = Message<"toolwire.v1.WatchResponse"> & {
    /**
     * @generated from field: toolwire.v1.CallEvent event = 1;
     */
    event?: CallEvent | undefined;
};
/**
 * Describes the message toolwire.v1.WatchResponse.
 * Use `create(WatchResponseSchema)` to create a new message.
 */
export declare const WatchResponseSchema: GenMessage<WatchResponse>;
/**
 * @generated from message toolwire.v1.CancelRequest
 */
export type CancelRequest = Message<"toolwire.v1.CancelRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: string reason = 2;
     */
    reason: string;
};
/**
 * Describes the message toolwire.v1.CancelRequest.
 * Use `create(CancelRequestSchema)` to create a new message.
 */
export declare const CancelRequestSchema: GenMessage<CancelRequest>;
/**
 * @generated from message toolwire.v1.CancelResponse
 */
export type CancelResponse = Message<"toolwire.v1.CancelResponse"> & {
    /**
     * @generated from field: toolwire.v1.CancelOutcome outcome = 1;
     */
    outcome: CancelOutcome;
};
/**
 * Describes the message toolwire.v1.CancelResponse.
 * Use `create(CancelResponseSchema)` to create a new message.
 */
export declare const CancelResponseSchema: GenMessage<CancelResponse>;
/**
 * @generated from message toolwire.v1.ListToolsRequest
 */
export type ListToolsRequest = Message<"toolwire.v1.ListToolsRequest"> & {
    /**
     * @generated from field: toolwire.v1.ToolFormat format = 1;
     */
    format: ToolFormat;
    /**
     * Glob on tool names; empty = all.
     *
     * @generated from field: string name_glob = 2;
     */
    nameGlob: string;
    /**
     * @generated from field: toolwire.v1.ExecutorType executor = 3;
     */
    executor: ExecutorType;
    /**
     * The session the list is for: the tools its mode forbids outright are
     * left out, and each tool is shown as its spec's definition for the
     * session's mode has it (docs/toolsets.md). Empty = no session (the
     * policy's default mode).
     *
     * @generated from field: string session = 4;
     */
    session: string;
    /**
     * Only the tools of this category; unspecified = all.
     *
     * @generated from field: toolwire.v1.ToolCategory category = 5;
     */
    category: ToolCategory;
    /**
     * The model the list is for (docs/toolsets.md): the policy's toolset
     * for its family hides, substitutes and narrows tools, and each spec's
     * definition for the family applies. Empty = none.
     *
     * @generated from field: string model = 6;
     */
    model: string;
};
/**
 * Describes the message toolwire.v1.ListToolsRequest.
 * Use `create(ListToolsRequestSchema)` to create a new message.
 */
export declare const ListToolsRequestSchema: GenMessage<ListToolsRequest>;
/**
 * @generated from message toolwire.v1.ListToolsResponse
 */
export type ListToolsResponse = Message<"toolwire.v1.ListToolsResponse"> & {
    /**
     * @generated from field: repeated toolwire.v1.ToolSpec tools = 1;
     */
    tools: ToolSpec[];
    /**
     * For provider formats: the tool list as that provider's JSON.
     *
     * @generated from field: string tools_json = 2;
     */
    toolsJson: string;
};
/**
 * Describes the message toolwire.v1.ListToolsResponse.
 * Use `create(ListToolsResponseSchema)` to create a new message.
 */
export declare const ListToolsResponseSchema: GenMessage<ListToolsResponse>;
/**
 * @generated from message toolwire.v1.GetToolRequest
 */
export type GetToolRequest = Message<"toolwire.v1.GetToolRequest"> & {
    /**
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * Empty = the current version.
     *
     * @generated from field: string version = 2;
     */
    version: string;
    /**
     * @generated from field: toolwire.v1.ToolFormat format = 3;
     */
    format: ToolFormat;
    /**
     * The model the tool is shown to (docs/toolsets.md), as ListTools's
     * model: a tool the toolset of its family hides or substitutes, or the
     * spec's definition for the family (in the policy's default mode)
     * hides, is not found; one is shown with the definition's description
     * and schema, and the toolset's variant schema, when they offer them.
     * Empty = none: the registered spec.
     *
     * @generated from field: string model = 4;
     */
    model: string;
};
/**
 * Describes the message toolwire.v1.GetToolRequest.
 * Use `create(GetToolRequestSchema)` to create a new message.
 */
export declare const GetToolRequestSchema: GenMessage<GetToolRequest>;
/**
 * @generated from message toolwire.v1.GetToolResponse
 */
export type GetToolResponse = Message<"toolwire.v1.GetToolResponse"> & {
    /**
     * @generated from field: toolwire.v1.ToolSpec tool = 1;
     */
    tool?: ToolSpec | undefined;
    /**
     * For provider formats: the tool as that provider's JSON.
     *
     * @generated from field: string tool_json = 2;
     */
    toolJson: string;
};
/**
 * Describes the message toolwire.v1.GetToolResponse.
 * Use `create(GetToolResponseSchema)` to create a new message.
 */
export declare const GetToolResponseSchema: GenMessage<GetToolResponse>;
/**
 * @generated from message toolwire.v1.ApproveToolRequest
 */
export type ApproveToolRequest = Message<"toolwire.v1.ApproveToolRequest"> & {
    /**
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * The definition hash being approved (ToolSpec.mcp.definition_hash of
     * the disabled spec); a different current hash is refused.
     *
     * @generated from field: string definition_hash = 2;
     */
    definitionHash: string;
};
/**
 * Describes the message toolwire.v1.ApproveToolRequest.
 * Use `create(ApproveToolRequestSchema)` to create a new message.
 */
export declare const ApproveToolRequestSchema: GenMessage<ApproveToolRequest>;
/**
 * @generated from message toolwire.v1.ApproveToolResponse
 */
export type ApproveToolResponse = Message<"toolwire.v1.ApproveToolResponse"> & {
    /**
     * @generated from field: toolwire.v1.ToolSpec tool = 1;
     */
    tool?: ToolSpec | undefined;
};
/**
 * Describes the message toolwire.v1.ApproveToolResponse.
 * Use `create(ApproveToolResponseSchema)` to create a new message.
 */
export declare const ApproveToolResponseSchema: GenMessage<ApproveToolResponse>;
/**
 * Session is the state the reference intent applier keeps for one agent
 * session: what the built-in intents change.
 *
 * @generated from message toolwire.v1.Session
 */
export type Session = Message<"toolwire.v1.Session"> & {
    /**
     * @generated from field: string tenant = 1;
     */
    tenant: string;
    /**
     * @generated from field: string session = 2;
     */
    session: string;
    /**
     * SET_STATE values by key, as JSON text.
     *
     * @generated from field: map<string, string> state_json = 3;
     */
    stateJson: {
        [key: string]: string;
    };
    /**
     * END_SESSION: the session is over (reason in end_reason).
     *
     * @generated from field: bool ended = 4;
     */
    ended: boolean;
    /**
     * @generated from field: string end_reason = 5;
     */
    endReason: string;
    /**
     * @generated from field: bool suppress_audio = 6;
     */
    suppressAudio: boolean;
    /**
     * @generated from field: bool suppress_transcript = 7;
     */
    suppressTranscript: boolean;
    /**
     * SET_PENDING_MESSAGE: the message to say next; empty = none.
     *
     * @generated from field: string pending_message = 8;
     */
    pendingMessage: string;
    /**
     * Every intent applied or refused, in order (the most recent ones kept).
     *
     * @generated from field: repeated toolwire.v1.AppliedIntent log = 9;
     */
    log: AppliedIntent[];
    /**
     * Bumped by every change.
     *
     * @generated from field: uint64 revision = 10;
     */
    revision: bigint;
    /**
     * @generated from field: google.protobuf.Timestamp updated_at = 11;
     */
    updatedAt?: Timestamp | undefined;
    /**
     * Keys ("<call_id>/<intent_id>") of the most recently applied intents,
     * remembered so that a repeated delivery applies nothing twice.
     *
     * @generated from field: repeated string applied = 12;
     */
    applied: string[];
    /**
     * SET_MODE: the session's mode, a name the policy declares; empty =
     * none.
     *
     * @generated from field: string mode = 13;
     */
    mode: string;
    /**
     * The spec version each tool's calls in the session run, by tool name
     * (pin_session_versions, or the policy's sessions.pin_versions): set by
     * the session's first call of the tool, cleared by ClearSessionPins.
     *
     * @generated from field: map<string, string> pinned_versions = 14;
     */
    pinnedVersions: {
        [key: string]: string;
    };
};
/**
 * Describes the message toolwire.v1.Session.
 * Use `create(SessionSchema)` to create a new message.
 */
export declare const SessionSchema: GenMessage<Session>;
/**
 * AppliedIntent is one intent the applier applied, or refused (refused
 * says why).
 *
 * @generated from message toolwire.v1.AppliedIntent
 */
export type AppliedIntent = Message<"toolwire.v1.AppliedIntent"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: string intent_id = 2;
     */
    intentId: string;
    /**
     * @generated from field: string type = 3;
     */
    type: string;
    /**
     * @generated from field: string payload_json = 4;
     */
    payloadJson: string;
    /**
     * @generated from field: google.protobuf.Timestamp applied_at = 5;
     */
    appliedAt?: Timestamp | undefined;
    /**
     * Why the intent was refused, not applied: it is not in the intent
     * catalog, the tool's spec version does not declare it, or it is
     * malformed. Empty for an applied intent.
     *
     * @generated from field: string refused = 6;
     */
    refused: string;
};
/**
 * Describes the message toolwire.v1.AppliedIntent.
 * Use `create(AppliedIntentSchema)` to create a new message.
 */
export declare const AppliedIntentSchema: GenMessage<AppliedIntent>;
/**
 * @generated from message toolwire.v1.GetSessionRequest
 */
export type GetSessionRequest = Message<"toolwire.v1.GetSessionRequest"> & {
    /**
     * @generated from field: string session = 1;
     */
    session: string;
};
/**
 * Describes the message toolwire.v1.GetSessionRequest.
 * Use `create(GetSessionRequestSchema)` to create a new message.
 */
export declare const GetSessionRequestSchema: GenMessage<GetSessionRequest>;
/**
 * @generated from message toolwire.v1.GetSessionResponse
 */
export type GetSessionResponse = Message<"toolwire.v1.GetSessionResponse"> & {
    /**
     * @generated from field: toolwire.v1.Session session = 1;
     */
    session?: Session | undefined;
};
/**
 * Describes the message toolwire.v1.GetSessionResponse.
 * Use `create(GetSessionResponseSchema)` to create a new message.
 */
export declare const GetSessionResponseSchema: GenMessage<GetSessionResponse>;
/**
 * @generated from message toolwire.v1.SetSessionModeRequest
 */
export type SetSessionModeRequest = Message<"toolwire.v1.SetSessionModeRequest"> & {
    /**
     * @generated from field: string session = 1;
     */
    session: string;
    /**
     * A mode the policy in force declares (modes:); empty = none.
     *
     * @generated from field: string mode = 2;
     */
    mode: string;
};
/**
 * Describes the message toolwire.v1.SetSessionModeRequest.
 * Use `create(SetSessionModeRequestSchema)` to create a new message.
 */
export declare const SetSessionModeRequestSchema: GenMessage<SetSessionModeRequest>;
/**
 * @generated from message toolwire.v1.SetSessionModeResponse
 */
export type SetSessionModeResponse = Message<"toolwire.v1.SetSessionModeResponse"> & {
    /**
     * @generated from field: toolwire.v1.Session session = 1;
     */
    session?: Session | undefined;
};
/**
 * Describes the message toolwire.v1.SetSessionModeResponse.
 * Use `create(SetSessionModeResponseSchema)` to create a new message.
 */
export declare const SetSessionModeResponseSchema: GenMessage<SetSessionModeResponse>;
/**
 * @generated from message toolwire.v1.ListSessionsRequest
 */
export type ListSessionsRequest = Message<"toolwire.v1.ListSessionsRequest"> & {
    /**
     * Unset = every state.
     *
     * @generated from field: toolwire.v1.SessionStateFilter state = 1;
     */
    state: SessionStateFilter;
    /**
     * Only sessions in this mode; empty = any mode.
     *
     * @generated from field: string mode = 2;
     */
    mode: string;
    /**
     * Most sessions to return; zero = 50, at most 500 (larger is lowered to
     * it).
     *
     * @generated from field: int32 page_size = 3;
     */
    pageSize: number;
    /**
     * Where to go on: a previous response's next_page_token; empty = from
     * the start.
     *
     * @generated from field: string page_token = 4;
     */
    pageToken: string;
};
/**
 * Describes the message toolwire.v1.ListSessionsRequest.
 * Use `create(ListSessionsRequestSchema)` to create a new message.
 */
export declare const ListSessionsRequestSchema: GenMessage<ListSessionsRequest>;
/**
 * @generated from message toolwire.v1.ListSessionsResponse
 */
export type ListSessionsResponse = Message<"toolwire.v1.ListSessionsResponse"> & {
    /**
     * Sessions in the order of their last update, oldest first, without
     * log, state_json and applied. A session updated while a listing pages
     * on may show again on a later page.
     *
     * @generated from field: repeated toolwire.v1.Session sessions = 1;
     */
    sessions: Session[];
    /**
     * Empty when the listing is complete. A page may hold fewer than
     * page_size sessions (the filters matched few of those read) and still
     * have a next page.
     *
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
};
/**
 * Describes the message toolwire.v1.ListSessionsResponse.
 * Use `create(ListSessionsResponseSchema)` to create a new message.
 */
export declare const ListSessionsResponseSchema: GenMessage<ListSessionsResponse>;
/**
 * @generated from message toolwire.v1.EndSessionRequest
 */
export type EndSessionRequest = Message<"toolwire.v1.EndSessionRequest"> & {
    /**
     * @generated from field: string session = 1;
     */
    session: string;
    /**
     * Why the session ends, recorded as its end_reason; at most 1,000 bytes
     * of UTF-8.
     *
     * @generated from field: string reason = 2;
     */
    reason: string;
};
/**
 * Describes the message toolwire.v1.EndSessionRequest.
 * Use `create(EndSessionRequestSchema)` to create a new message.
 */
export declare const EndSessionRequestSchema: GenMessage<EndSessionRequest>;
/**
 * @generated from message toolwire.v1.EndSessionResponse
 */
export type EndSessionResponse = Message<"toolwire.v1.EndSessionResponse"> & {
    /**
     * @generated from field: toolwire.v1.Session session = 1;
     */
    session?: Session | undefined;
};
/**
 * Describes the message toolwire.v1.EndSessionResponse.
 * Use `create(EndSessionResponseSchema)` to create a new message.
 */
export declare const EndSessionResponseSchema: GenMessage<EndSessionResponse>;
/**
 * @generated from message toolwire.v1.ClearSessionPinsRequest
 */
export type ClearSessionPinsRequest = Message<"toolwire.v1.ClearSessionPinsRequest"> & {
    /**
     * @generated from field: string session = 1;
     */
    session: string;
    /**
     * The tool whose pin to clear; empty = every pin of the session.
     *
     * @generated from field: string tool = 2;
     */
    tool: string;
};
/**
 * Describes the message toolwire.v1.ClearSessionPinsRequest.
 * Use `create(ClearSessionPinsRequestSchema)` to create a new message.
 */
export declare const ClearSessionPinsRequestSchema: GenMessage<ClearSessionPinsRequest>;
/**
 * @generated from message toolwire.v1.ClearSessionPinsResponse
 */
export type ClearSessionPinsResponse = Message<"toolwire.v1.ClearSessionPinsResponse"> & {
    /**
     * @generated from field: toolwire.v1.Session session = 1;
     */
    session?: Session | undefined;
};
/**
 * Describes the message toolwire.v1.ClearSessionPinsResponse.
 * Use `create(ClearSessionPinsResponseSchema)` to create a new message.
 */
export declare const ClearSessionPinsResponseSchema: GenMessage<ClearSessionPinsResponse>;
/**
 * @generated from message toolwire.v1.ApplyIntentsRequest
 */
export type ApplyIntentsRequest = Message<"toolwire.v1.ApplyIntentsRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
};
/**
 * Describes the message toolwire.v1.ApplyIntentsRequest.
 * Use `create(ApplyIntentsRequestSchema)` to create a new message.
 */
export declare const ApplyIntentsRequestSchema: GenMessage<ApplyIntentsRequest>;
/**
 * @generated from message toolwire.v1.ApplyIntentsResponse
 */
export type ApplyIntentsResponse = Message<"toolwire.v1.ApplyIntentsResponse"> & {
    /**
     * @generated from field: toolwire.v1.Session session = 1;
     */
    session?: Session | undefined;
    /**
     * Intents of the call applied now; ones applied before are skipped.
     *
     * @generated from field: int32 applied = 2;
     */
    applied: number;
    /**
     * @generated from field: int32 skipped = 3;
     */
    skipped: number;
    /**
     * The call's intents refused, each with its reason (AppliedIntent.
     * refused); the session's log records each refusal once.
     *
     * @generated from field: repeated toolwire.v1.AppliedIntent refused = 4;
     */
    refused: AppliedIntent[];
};
/**
 * Describes the message toolwire.v1.ApplyIntentsResponse.
 * Use `create(ApplyIntentsResponseSchema)` to create a new message.
 */
export declare const ApplyIntentsResponseSchema: GenMessage<ApplyIntentsResponse>;
/**
 * GetOutputRequest reads a call's output text: its text blocks joined by
 * newlines (its structured JSON when it has no text block), the whole of
 * it when the inline response was truncated.
 *
 * @generated from message toolwire.v1.GetOutputRequest
 */
export type GetOutputRequest = Message<"toolwire.v1.GetOutputRequest"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * Byte offset to read from. With a pattern: the lines that start at or
     * after it are searched.
     *
     * @generated from field: int64 offset = 2;
     */
    offset: bigint;
    /**
     * Most bytes of text to return (the matching lines' text with a
     * pattern); zero = 64 KiB, at most 1 MiB (larger is lowered to it).
     *
     * @generated from field: int64 limit = 3;
     */
    limit: bigint;
    /**
     * When set, return only the lines that match this RE2 regular
     * expression (Go regexp syntax, at most 1,024 bytes); a line longer
     * than 1 MiB is searched in pieces of at most 1 MiB.
     *
     * @generated from field: string grep = 4;
     */
    grep: string;
};
/**
 * Describes the message toolwire.v1.GetOutputRequest.
 * Use `create(GetOutputRequestSchema)` to create a new message.
 */
export declare const GetOutputRequestSchema: GenMessage<GetOutputRequest>;
/**
 * @generated from message toolwire.v1.GetOutputResponse
 */
export type GetOutputResponse = Message<"toolwire.v1.GetOutputResponse"> & {
    /**
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * DONE when the output is here; PENDING or UNKNOWN otherwise (nothing
     * else is set).
     *
     * @generated from field: toolwire.v1.CallState state = 2;
     */
    state: CallState;
    /**
     * The text from offset (without a pattern). A range never splits a
     * character: offset and next_offset are moved to character boundaries.
     *
     * @generated from field: string text = 3;
     */
    text: string;
    /**
     * The lines that match the pattern, in order (with a pattern).
     *
     * @generated from field: repeated toolwire.v1.OutputLine lines = 4;
     */
    lines: OutputLine[];
    /**
     * Where the text (or the first line searched) starts.
     *
     * @generated from field: int64 offset = 5;
     */
    offset: bigint;
    /**
     * Where the next read starts: offset plus the bytes read (or searched).
     *
     * @generated from field: int64 next_offset = 6;
     */
    nextOffset: bigint;
    /**
     * Size of the whole output text in bytes.
     *
     * @generated from field: int64 size = 7;
     */
    size: bigint;
    /**
     * next_offset reached the end of the output.
     *
     * @generated from field: bool eof = 8;
     */
    eof: boolean;
    /**
     * The inline response was truncated; this reads the whole output.
     *
     * @generated from field: bool truncated = 9;
     */
    truncated: boolean;
};
/**
 * Describes the message toolwire.v1.GetOutputResponse.
 * Use `create(GetOutputResponseSchema)` to create a new message.
 */
export declare const GetOutputResponseSchema: GenMessage<GetOutputResponse>;
/**
 * OutputLine is a line of an output text that matched a pattern.
 *
 * @generated from message toolwire.v1.OutputLine
 */
export type OutputLine = Message<"toolwire.v1.OutputLine"> & {
    /**
     * 1-based line number.
     *
     * @generated from field: int64 number = 1;
     */
    number: bigint;
    /**
     * Byte offset of the text in the output.
     *
     * @generated from field: int64 offset = 2;
     */
    offset: bigint;
    /**
     * The line without its newline (a piece of it when the line is longer
     * than 1 MiB, or longer than the rest of the limit: then cut is set).
     *
     * @generated from field: string text = 3;
     */
    text: string;
    /**
     * @generated from field: bool cut = 4;
     */
    cut: boolean;
};
/**
 * Describes the message toolwire.v1.OutputLine.
 * Use `create(OutputLineSchema)` to create a new message.
 */
export declare const OutputLineSchema: GenMessage<OutputLine>;
/**
 * @generated from message toolwire.v1.ListApprovalsRequest
 */
export type ListApprovalsRequest = Message<"toolwire.v1.ListApprovalsRequest"> & {
    /**
     * Unset = every state.
     *
     * @generated from field: toolwire.v1.ApprovalState state = 1;
     */
    state: ApprovalState;
    /**
     * Glob on tool names; empty = all.
     *
     * @generated from field: string tool = 2;
     */
    tool: string;
    /**
     * @generated from field: string agent = 3;
     */
    agent: string;
    /**
     * @generated from field: string session = 4;
     */
    session: string;
    /**
     * Most approvals to return; zero = 100, at most 1,000.
     *
     * @generated from field: int32 limit = 5;
     */
    limit: number;
};
/**
 * Describes the message toolwire.v1.ListApprovalsRequest.
 * Use `create(ListApprovalsRequestSchema)` to create a new message.
 */
export declare const ListApprovalsRequestSchema: GenMessage<ListApprovalsRequest>;
/**
 * @generated from message toolwire.v1.ListApprovalsResponse
 */
export type ListApprovalsResponse = Message<"toolwire.v1.ListApprovalsResponse"> & {
    /**
     * @generated from field: repeated toolwire.v1.Approval approvals = 1;
     */
    approvals: Approval[];
    /**
     * More approvals matched than limit.
     *
     * @generated from field: bool truncated = 2;
     */
    truncated: boolean;
};
/**
 * Describes the message toolwire.v1.ListApprovalsResponse.
 * Use `create(ListApprovalsResponseSchema)` to create a new message.
 */
export declare const ListApprovalsResponseSchema: GenMessage<ListApprovalsResponse>;
/**
 * @generated from message toolwire.v1.GetApprovalRequest
 */
export type GetApprovalRequest = Message<"toolwire.v1.GetApprovalRequest"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
};
/**
 * Describes the message toolwire.v1.GetApprovalRequest.
 * Use `create(GetApprovalRequestSchema)` to create a new message.
 */
export declare const GetApprovalRequestSchema: GenMessage<GetApprovalRequest>;
/**
 * @generated from message toolwire.v1.GetApprovalResponse
 */
export type GetApprovalResponse = Message<"toolwire.v1.GetApprovalResponse"> & {
    /**
     * @generated from field: toolwire.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
};
/**
 * Describes the message toolwire.v1.GetApprovalResponse.
 * Use `create(GetApprovalResponseSchema)` to create a new message.
 */
export declare const GetApprovalResponseSchema: GenMessage<GetApprovalResponse>;
/**
 * @generated from message toolwire.v1.ApproveRequest
 */
export type ApproveRequest = Message<"toolwire.v1.ApproveRequest"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * Unset = once.
     *
     * @generated from field: toolwire.v1.ApprovalScope scope = 2;
     */
    scope: ApprovalScope;
    /**
     * For a grant: argument field path -> glob the later calls must match.
     *
     * @generated from field: map<string, string> args_pattern = 3;
     */
    argsPattern: {
        [key: string]: string;
    };
    /**
     * For a grant: how long it lasts; zero = the dispatcher's default
     * grant lifetime.
     *
     * @generated from field: google.protobuf.Duration ttl = 4;
     */
    ttl?: Duration | undefined;
    /**
     * @generated from field: string reason = 5;
     */
    reason: string;
    /**
     * For a grant: the tool glob it covers; empty = the parked call's tool.
     *
     * @generated from field: string tool = 6;
     */
    tool: string;
};
/**
 * Describes the message toolwire.v1.ApproveRequest.
 * Use `create(ApproveRequestSchema)` to create a new message.
 */
export declare const ApproveRequestSchema: GenMessage<ApproveRequest>;
/**
 * @generated from message toolwire.v1.ApproveResponse
 */
export type ApproveResponse = Message<"toolwire.v1.ApproveResponse"> & {
    /**
     * @generated from field: toolwire.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
    /**
     * The grant stored, for a session, agent or tenant scope.
     *
     * @generated from field: toolwire.v1.Grant grant = 2;
     */
    grant?: Grant | undefined;
};
/**
 * Describes the message toolwire.v1.ApproveResponse.
 * Use `create(ApproveResponseSchema)` to create a new message.
 */
export declare const ApproveResponseSchema: GenMessage<ApproveResponse>;
/**
 * @generated from message toolwire.v1.DenyRequest
 */
export type DenyRequest = Message<"toolwire.v1.DenyRequest"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * Told to the caller; required.
     *
     * @generated from field: string reason = 2;
     */
    reason: string;
};
/**
 * Describes the message toolwire.v1.DenyRequest.
 * Use `create(DenyRequestSchema)` to create a new message.
 */
export declare const DenyRequestSchema: GenMessage<DenyRequest>;
/**
 * @generated from message toolwire.v1.DenyResponse
 */
export type DenyResponse = Message<"toolwire.v1.DenyResponse"> & {
    /**
     * @generated from field: toolwire.v1.Approval approval = 1;
     */
    approval?: Approval | undefined;
};
/**
 * Describes the message toolwire.v1.DenyResponse.
 * Use `create(DenyResponseSchema)` to create a new message.
 */
export declare const DenyResponseSchema: GenMessage<DenyResponse>;
/**
 * @generated from message toolwire.v1.ListGrantsRequest
 */
export type ListGrantsRequest = Message<"toolwire.v1.ListGrantsRequest"> & {
    /**
     * @generated from field: string agent = 1;
     */
    agent: string;
    /**
     * @generated from field: string session = 2;
     */
    session: string;
};
/**
 * Describes the message toolwire.v1.ListGrantsRequest.
 * Use `create(ListGrantsRequestSchema)` to create a new message.
 */
export declare const ListGrantsRequestSchema: GenMessage<ListGrantsRequest>;
/**
 * @generated from message toolwire.v1.ListGrantsResponse
 */
export type ListGrantsResponse = Message<"toolwire.v1.ListGrantsResponse"> & {
    /**
     * @generated from field: repeated toolwire.v1.Grant grants = 1;
     */
    grants: Grant[];
};
/**
 * Describes the message toolwire.v1.ListGrantsResponse.
 * Use `create(ListGrantsResponseSchema)` to create a new message.
 */
export declare const ListGrantsResponseSchema: GenMessage<ListGrantsResponse>;
/**
 * @generated from message toolwire.v1.RevokeGrantRequest
 */
export type RevokeGrantRequest = Message<"toolwire.v1.RevokeGrantRequest"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
};
/**
 * Describes the message toolwire.v1.RevokeGrantRequest.
 * Use `create(RevokeGrantRequestSchema)` to create a new message.
 */
export declare const RevokeGrantRequestSchema: GenMessage<RevokeGrantRequest>;
/**
 * @generated from message toolwire.v1.RevokeGrantResponse
 */
export type RevokeGrantResponse = Message<"toolwire.v1.RevokeGrantResponse"> & {
    /**
     * The grant existed and is gone.
     *
     * @generated from field: bool revoked = 1;
     */
    revoked: boolean;
};
/**
 * Describes the message toolwire.v1.RevokeGrantResponse.
 * Use `create(RevokeGrantResponseSchema)` to create a new message.
 */
export declare const RevokeGrantResponseSchema: GenMessage<RevokeGrantResponse>;
/**
 * @generated from message toolwire.v1.ApplyPolicyRequest
 */
export type ApplyPolicyRequest = Message<"toolwire.v1.ApplyPolicyRequest"> & {
    /**
     * The policy document (YAML), at most 1 MiB.
     *
     * @generated from field: string document = 1;
     */
    document: string;
    /**
     * @generated from field: string comment = 2;
     */
    comment: string;
    /**
     * Check (parse, compile, run its tests) without applying.
     *
     * @generated from field: bool dry_run = 3;
     */
    dryRun: boolean;
};
/**
 * Describes the message toolwire.v1.ApplyPolicyRequest.
 * Use `create(ApplyPolicyRequestSchema)` to create a new message.
 */
export declare const ApplyPolicyRequestSchema: GenMessage<ApplyPolicyRequest>;
/**
 * @generated from message toolwire.v1.ApplyPolicyResponse
 */
export type ApplyPolicyResponse = Message<"toolwire.v1.ApplyPolicyResponse"> & {
    /**
     * @generated from field: toolwire.v1.PolicyVersion version = 1;
     */
    version?: PolicyVersion | undefined;
    /**
     * False when the document was already the one in force.
     *
     * @generated from field: bool changed = 2;
     */
    changed: boolean;
    /**
     * The document's tests that ran (all passed).
     *
     * @generated from field: int32 tests_passed = 3;
     */
    testsPassed: number;
    /**
     * True when the replica that answered had the version in force when it
     * answered. False on a dry run, when a later apply replaced it, or when
     * the replica could not load it within 5 s: the apply is stored all the
     * same, and every replica keeps trying to load it.
     *
     * @generated from field: bool in_force = 4;
     */
    inForce: boolean;
    /**
     * The dispatchers that enforce the version when the answer was sent:
     * apply answers once every dispatcher that answered its ask within
     * 250 ms enforces it, or after 5 s.
     *
     * @generated from field: repeated string replicas_in_force = 5;
     */
    replicasInForce: string[];
    /**
     * The dispatchers that answered and did not enforce it by then, each
     * with why (not yet, could not load it, a later change replaced it).
     *
     * @generated from field: map<string, string> replicas_not_in_force = 6;
     */
    replicasNotInForce: {
        [key: string]: string;
    };
};
/**
 * Describes the message toolwire.v1.ApplyPolicyResponse.
 * Use `create(ApplyPolicyResponseSchema)` to create a new message.
 */
export declare const ApplyPolicyResponseSchema: GenMessage<ApplyPolicyResponse>;
/**
 * @generated from message toolwire.v1.GetUsageRequest
 */
export type GetUsageRequest = Message<"toolwire.v1.GetUsageRequest"> & {
    /**
     * Empty = the caller's own agent.
     *
     * @generated from field: string agent = 1;
     */
    agent: string;
    /**
     * @generated from field: string session = 2;
     */
    session: string;
    /**
     * @generated from field: string user = 3;
     */
    user: string;
    /**
     * @generated from field: string run = 4;
     */
    run: string;
};
/**
 * Describes the message toolwire.v1.GetUsageRequest.
 * Use `create(GetUsageRequestSchema)` to create a new message.
 */
export declare const GetUsageRequestSchema: GenMessage<GetUsageRequest>;
/**
 * LimitUsage is one limit of the policy in force, as it stands for one key.
 *
 * @generated from message toolwire.v1.LimitUsage
 */
export type LimitUsage = Message<"toolwire.v1.LimitUsage"> & {
    /**
     * @generated from field: string limit = 1;
     */
    limit: string;
    /**
     * @generated from field: string reason = 2;
     */
    reason: string;
    /**
     * How the limit counts: tenant, agent, session, user, run, tool, chain or a CEL
     * expression.
     *
     * @generated from field: string key = 3;
     */
    key: string;
    /**
     * The key read; empty for tool, chain and CEL keys, which depend on each call
     * (nothing is read for them).
     *
     * @generated from field: string value = 4;
     */
    value: string;
    /**
     * The rate, when the limit has one: rate_count per rate_per, rate_burst
     * at once.
     *
     * @generated from field: int64 rate_count = 5;
     */
    rateCount: bigint;
    /**
     * @generated from field: google.protobuf.Duration rate_per = 6;
     */
    ratePer?: Duration | undefined;
    /**
     * @generated from field: int64 rate_burst = 7;
     */
    rateBurst: bigint;
    /**
     * The concurrency cap, when the limit has one, and the calls running.
     *
     * @generated from field: int32 concurrency = 8;
     */
    concurrency: number;
    /**
     * @generated from field: int32 in_flight = 9;
     */
    inFlight: number;
    /**
     * The budget, when the limit has one: budget_units per budget_window,
     * and the current window's use.
     *
     * @generated from field: int64 budget_units = 10;
     */
    budgetUnits: bigint;
    /**
     * @generated from field: google.protobuf.Duration budget_window = 11;
     */
    budgetWindow?: Duration | undefined;
    /**
     * @generated from field: int64 used = 12;
     */
    used: bigint;
    /**
     * @generated from field: int64 remaining = 13;
     */
    remaining: bigint;
    /**
     * @generated from field: google.protobuf.Timestamp reset_at = 14;
     */
    resetAt?: Timestamp | undefined;
};
/**
 * Describes the message toolwire.v1.LimitUsage.
 * Use `create(LimitUsageSchema)` to create a new message.
 */
export declare const LimitUsageSchema: GenMessage<LimitUsage>;
/**
 * @generated from message toolwire.v1.GetUsageResponse
 */
export type GetUsageResponse = Message<"toolwire.v1.GetUsageResponse"> & {
    /**
     * @generated from field: repeated toolwire.v1.LimitUsage limits = 1;
     */
    limits: LimitUsage[];
    /**
     * The policy version the limits are from; empty without a policy.
     *
     * @generated from field: string policy_version = 2;
     */
    policyVersion: string;
};
/**
 * Describes the message toolwire.v1.GetUsageResponse.
 * Use `create(GetUsageResponseSchema)` to create a new message.
 */
export declare const GetUsageResponseSchema: GenMessage<GetUsageResponse>;
/**
 * @generated from message toolwire.v1.RemovePolicyRequest
 */
export type RemovePolicyRequest = Message<"toolwire.v1.RemovePolicyRequest"> & {};
/**
 * Describes the message toolwire.v1.RemovePolicyRequest.
 * Use `create(RemovePolicyRequestSchema)` to create a new message.
 */
export declare const RemovePolicyRequestSchema: GenMessage<RemovePolicyRequest>;
/**
 * @generated from message toolwire.v1.RemovePolicyResponse
 */
export type RemovePolicyResponse = Message<"toolwire.v1.RemovePolicyResponse"> & {
    /**
     * False when the tenant had no document of its own.
     *
     * @generated from field: bool removed = 1;
     */
    removed: boolean;
    /**
     * What is in force for the tenant now: the installation document
     * (tenant "*"), or unset for no policy.
     *
     * @generated from field: toolwire.v1.PolicyVersion in_force = 2;
     */
    inForce?: PolicyVersion | undefined;
    /**
     * As ApplyPolicyResponse's: the dispatchers that enforce the removal,
     * and those that answered and did not.
     *
     * @generated from field: repeated string replicas_in_force = 3;
     */
    replicasInForce: string[];
    /**
     * @generated from field: map<string, string> replicas_not_in_force = 4;
     */
    replicasNotInForce: {
        [key: string]: string;
    };
};
/**
 * Describes the message toolwire.v1.RemovePolicyResponse.
 * Use `create(RemovePolicyResponseSchema)` to create a new message.
 */
export declare const RemovePolicyResponseSchema: GenMessage<RemovePolicyResponse>;
/**
 * @generated from message toolwire.v1.GetPolicyRequest
 */
export type GetPolicyRequest = Message<"toolwire.v1.GetPolicyRequest"> & {
    /**
     * Empty = the version in force.
     *
     * @generated from field: string version = 1;
     */
    version: string;
};
/**
 * Describes the message toolwire.v1.GetPolicyRequest.
 * Use `create(GetPolicyRequestSchema)` to create a new message.
 */
export declare const GetPolicyRequestSchema: GenMessage<GetPolicyRequest>;
/**
 * @generated from message toolwire.v1.GetPolicyResponse
 */
export type GetPolicyResponse = Message<"toolwire.v1.GetPolicyResponse"> & {
    /**
     * Unset when no policy is in force for the tenant.
     *
     * @generated from field: toolwire.v1.PolicyVersion version = 1;
     */
    version?: PolicyVersion | undefined;
    /**
     * The document as applied, comments kept.
     *
     * @generated from field: string document = 2;
     */
    document: string;
};
/**
 * Describes the message toolwire.v1.GetPolicyResponse.
 * Use `create(GetPolicyResponseSchema)` to create a new message.
 */
export declare const GetPolicyResponseSchema: GenMessage<GetPolicyResponse>;
/**
 * @generated from message toolwire.v1.ListPolicyVersionsRequest
 */
export type ListPolicyVersionsRequest = Message<"toolwire.v1.ListPolicyVersionsRequest"> & {
    /**
     * Zero = 20, at most 64.
     *
     * @generated from field: int32 limit = 1;
     */
    limit: number;
};
/**
 * Describes the message toolwire.v1.ListPolicyVersionsRequest.
 * Use `create(ListPolicyVersionsRequestSchema)` to create a new message.
 */
export declare const ListPolicyVersionsRequestSchema: GenMessage<ListPolicyVersionsRequest>;
/**
 * @generated from message toolwire.v1.ListPolicyVersionsResponse
 */
export type ListPolicyVersionsResponse = Message<"toolwire.v1.ListPolicyVersionsResponse"> & {
    /**
     * Newest first; the first is in force (unless the policy was removed).
     *
     * @generated from field: repeated toolwire.v1.PolicyVersion versions = 1;
     */
    versions: PolicyVersion[];
};
/**
 * Describes the message toolwire.v1.ListPolicyVersionsResponse.
 * Use `create(ListPolicyVersionsResponseSchema)` to create a new message.
 */
export declare const ListPolicyVersionsResponseSchema: GenMessage<ListPolicyVersionsResponse>;
/**
 * ExplainRequest is a call to decide about, and on whose behalf.
 *
 * @generated from message toolwire.v1.ExplainRequest
 */
export type ExplainRequest = Message<"toolwire.v1.ExplainRequest"> & {
    /**
     * @generated from field: string tool = 1;
     */
    tool: string;
    /**
     * @generated from field: string arguments_json = 2;
     */
    argumentsJson: string;
    /**
     * Empty = the current version.
     *
     * @generated from field: string spec_version = 3;
     */
    specVersion: string;
    /**
     * Of the caller's tenant; empty agent = the caller's own.
     *
     * @generated from field: string agent = 4;
     */
    agent: string;
    /**
     * @generated from field: string session = 5;
     */
    session: string;
    /**
     * @generated from field: string user = 6;
     */
    user: string;
    /**
     * @generated from field: string run = 7;
     */
    run: string;
    /**
     * @generated from field: repeated string scopes = 8;
     */
    scopes: string[];
    /**
     * Decide as if this approval were presented.
     *
     * @generated from field: string approval_id = 9;
     */
    approvalId: string;
    /**
     * Decide with this policy version instead of the one in force.
     *
     * @generated from field: string policy_version = 10;
     */
    policyVersion: string;
    /**
     * Decide as if the session were in this mode (caller.mode).
     *
     * @generated from field: string mode = 11;
     */
    mode: string;
    /**
     * Decide as if the call were made for this model (caller.model; its
     * family derived as admission derives it: docs/toolsets.md).
     *
     * @generated from field: string model = 12;
     */
    model: string;
};
/**
 * Describes the message toolwire.v1.ExplainRequest.
 * Use `create(ExplainRequestSchema)` to create a new message.
 */
export declare const ExplainRequestSchema: GenMessage<ExplainRequest>;
/**
 * ExplainedRule is one rule the decision looked at.
 *
 * @generated from message toolwire.v1.ExplainedRule
 */
export type ExplainedRule = Message<"toolwire.v1.ExplainedRule"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * "tenant", or "agent <name>".
     *
     * @generated from field: string layer = 2;
     */
    layer: string;
    /**
     * "allow", "ask" or "deny".
     *
     * @generated from field: string effect = 3;
     */
    effect: string;
    /**
     * @generated from field: bool matched = 4;
     */
    matched: boolean;
    /**
     * @generated from field: string reason = 5;
     */
    reason: string;
    /**
     * Why it matched or not: argument values against patterns, the
     * condition's value or error.
     *
     * @generated from field: string note = 6;
     */
    note: string;
    /**
     * Line in the document.
     *
     * @generated from field: int32 line = 7;
     */
    line: number;
};
/**
 * Describes the message toolwire.v1.ExplainedRule.
 * Use `create(ExplainedRuleSchema)` to create a new message.
 */
export declare const ExplainedRuleSchema: GenMessage<ExplainedRule>;
/**
 * @generated from message toolwire.v1.ExplainResponse
 */
export type ExplainResponse = Message<"toolwire.v1.ExplainResponse"> & {
    /**
     * @generated from field: toolwire.v1.PolicyDecision decision = 1;
     */
    decision?: PolicyDecision | undefined;
    /**
     * The applicable layers with their defaults.
     *
     * @generated from field: repeated string layers = 2;
     */
    layers: string[];
    /**
     * Every rule of those layers that names the tool.
     *
     * @generated from field: repeated toolwire.v1.ExplainedRule rules = 3;
     */
    rules: ExplainedRule[];
    /**
     * Rules that do not name the tool.
     *
     * @generated from field: int32 others = 4;
     */
    others: number;
    /**
     * The grant that covered the ask, if any.
     *
     * @generated from field: toolwire.v1.Grant grant = 5;
     */
    grant?: Grant | undefined;
    /**
     * Why the approval presented did not cover the call.
     *
     * @generated from field: string approval_error = 6;
     */
    approvalError: string;
    /**
     * Rules whose condition could not be evaluated.
     *
     * @generated from field: repeated string errors = 7;
     */
    errors: string[];
    /**
     * The policy's session rules (sessions:) and what they do to this
     * call: "required, opened_only, default_mode voice; ..."; empty when
     * the policy has none.
     *
     * @generated from field: string sessions = 8;
     */
    sessions: string;
};
/**
 * Describes the message toolwire.v1.ExplainResponse.
 * Use `create(ExplainResponseSchema)` to create a new message.
 */
export declare const ExplainResponseSchema: GenMessage<ExplainResponse>;
/**
 * @generated from message toolwire.v1.ListPoolsRequest
 */
export type ListPoolsRequest = Message<"toolwire.v1.ListPoolsRequest"> & {};
/**
 * Describes the message toolwire.v1.ListPoolsRequest.
 * Use `create(ListPoolsRequestSchema)` to create a new message.
 */
export declare const ListPoolsRequestSchema: GenMessage<ListPoolsRequest>;
/**
 * Pool is one worker pool as a dispatcher last read it.
 *
 * @generated from message toolwire.v1.Pool
 */
export type Pool = Message<"toolwire.v1.Pool"> & {
    /**
     * @generated from field: string name = 1;
     */
    name: string;
    /**
     * The pool's durable consumer of the calls stream.
     *
     * @generated from field: string consumer = 2;
     */
    consumer: string;
    /**
     * Calls queued (no worker took them yet) and in flight.
     *
     * @generated from field: int64 queued = 3;
     */
    queued: bigint;
    /**
     * @generated from field: int64 in_flight = 4;
     */
    inFlight: bigint;
    /**
     * The consumer delivers nothing.
     *
     * @generated from field: bool paused = 5;
     */
    paused: boolean;
    /**
     * Who paused it through toolwire (tenant/agent), when and why; empty
     * when no one did.
     *
     * @generated from field: string paused_by = 6;
     */
    pausedBy: string;
    /**
     * @generated from field: google.protobuf.Timestamp paused_at = 7;
     */
    pausedAt?: Timestamp | undefined;
    /**
     * @generated from field: string pause_reason = 8;
     */
    pauseReason: string;
    /**
     * How the pause and its record disagree (a pause or resume made outside
     * toolwire); empty when they agree.
     *
     * @generated from field: string pause_drift = 9;
     */
    pauseDrift: string;
};
/**
 * Describes the message toolwire.v1.Pool.
 * Use `create(PoolSchema)` to create a new message.
 */
export declare const PoolSchema: GenMessage<Pool>;
/**
 * @generated from message toolwire.v1.ListPoolsResponse
 */
export type ListPoolsResponse = Message<"toolwire.v1.ListPoolsResponse"> & {
    /**
     * @generated from field: repeated toolwire.v1.Pool pools = 1;
     */
    pools: Pool[];
};
/**
 * Describes the message toolwire.v1.ListPoolsResponse.
 * Use `create(ListPoolsResponseSchema)` to create a new message.
 */
export declare const ListPoolsResponseSchema: GenMessage<ListPoolsResponse>;
/**
 * @generated from message toolwire.v1.PausePoolRequest
 */
export type PausePoolRequest = Message<"toolwire.v1.PausePoolRequest"> & {
    /**
     * @generated from field: string pool = 1;
     */
    pool: string;
    /**
     * Why; at most 512 bytes.
     *
     * @generated from field: string reason = 2;
     */
    reason: string;
};
/**
 * Describes the message toolwire.v1.PausePoolRequest.
 * Use `create(PausePoolRequestSchema)` to create a new message.
 */
export declare const PausePoolRequestSchema: GenMessage<PausePoolRequest>;
/**
 * @generated from message toolwire.v1.PausePoolResponse
 */
export type PausePoolResponse = Message<"toolwire.v1.PausePoolResponse"> & {
    /**
     * @generated from field: string paused_by = 1;
     */
    pausedBy: string;
    /**
     * @generated from field: google.protobuf.Timestamp paused_at = 2;
     */
    pausedAt?: Timestamp | undefined;
};
/**
 * Describes the message toolwire.v1.PausePoolResponse.
 * Use `create(PausePoolResponseSchema)` to create a new message.
 */
export declare const PausePoolResponseSchema: GenMessage<PausePoolResponse>;
/**
 * @generated from message toolwire.v1.ResumePoolRequest
 */
export type ResumePoolRequest = Message<"toolwire.v1.ResumePoolRequest"> & {
    /**
     * @generated from field: string pool = 1;
     */
    pool: string;
};
/**
 * Describes the message toolwire.v1.ResumePoolRequest.
 * Use `create(ResumePoolRequestSchema)` to create a new message.
 */
export declare const ResumePoolRequestSchema: GenMessage<ResumePoolRequest>;
/**
 * @generated from message toolwire.v1.ResumePoolResponse
 */
export type ResumePoolResponse = Message<"toolwire.v1.ResumePoolResponse"> & {};
/**
 * Describes the message toolwire.v1.ResumePoolResponse.
 * Use `create(ResumePoolResponseSchema)` to create a new message.
 */
export declare const ResumePoolResponseSchema: GenMessage<ResumePoolResponse>;
/**
 * CallState is where a call is.
 *
 * @generated from enum toolwire.v1.CallState
 */
export declare enum CallState {
    /**
     * @generated from enum value: CALL_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Accepted, no terminal response yet.
     *
     * @generated from enum value: CALL_STATE_PENDING = 1;
     */
    PENDING = 1,
    /**
     * The terminal response is in `response`.
     *
     * @generated from enum value: CALL_STATE_DONE = 2;
     */
    DONE = 2,
    /**
     * No such call is known. The API answers NOT_FOUND instead (GetResult,
     * GetOutput, Watch); in-process callers of the dispatcher see it.
     *
     * @generated from enum value: CALL_STATE_UNKNOWN = 3;
     */
    UNKNOWN = 3,
    /**
     * Parked by an ask decision until an approver decides; `response` is
     * the CONFIRMATION_REQUIRED answer with the approval id.
     *
     * @generated from enum value: CALL_STATE_AWAITING_APPROVAL = 4;
     */
    AWAITING_APPROVAL = 4
}
/**
 * Describes the enum toolwire.v1.CallState.
 */
export declare const CallStateSchema: GenEnum<CallState>;
/**
 * ToolFormat selects how ListTools and GetTool render tool definitions.
 *
 * @generated from enum toolwire.v1.ToolFormat
 */
export declare enum ToolFormat {
    /**
     * Native ToolSpec messages only.
     *
     * @generated from enum value: TOOL_FORMAT_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: TOOL_FORMAT_NATIVE = 1;
     */
    NATIVE = 1,
    /**
     * @generated from enum value: TOOL_FORMAT_OPENAI = 2;
     */
    OPENAI = 2,
    /**
     * @generated from enum value: TOOL_FORMAT_ANTHROPIC = 3;
     */
    ANTHROPIC = 3,
    /**
     * @generated from enum value: TOOL_FORMAT_GEMINI = 4;
     */
    GEMINI = 4,
    /**
     * @generated from enum value: TOOL_FORMAT_MCP = 5;
     */
    MCP = 5
}
/**
 * Describes the enum toolwire.v1.ToolFormat.
 */
export declare const ToolFormatSchema: GenEnum<ToolFormat>;
/**
 * CancelOutcome says what a Cancel did.
 *
 * @generated from enum toolwire.v1.CancelOutcome
 */
export declare enum CancelOutcome {
    /**
     * @generated from enum value: CANCEL_OUTCOME_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * The tombstone is written; the call stops or never starts.
     *
     * @generated from enum value: CANCEL_OUTCOME_REQUESTED = 1;
     */
    REQUESTED = 1,
    /**
     * The call had already finished; nothing changed.
     *
     * @generated from enum value: CANCEL_OUTCOME_ALREADY_FINISHED = 2;
     */
    ALREADY_FINISHED = 2,
    /**
     * No such call; nothing changed.
     *
     * @generated from enum value: CANCEL_OUTCOME_UNKNOWN_CALL = 3;
     */
    UNKNOWN_CALL = 3
}
/**
 * Describes the enum toolwire.v1.CancelOutcome.
 */
export declare const CancelOutcomeSchema: GenEnum<CancelOutcome>;
/**
 * SessionStateFilter selects sessions by state.
 *
 * @generated from enum toolwire.v1.SessionStateFilter
 */
export declare enum SessionStateFilter {
    /**
     * Every session.
     *
     * @generated from enum value: SESSION_STATE_FILTER_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Sessions not ended.
     *
     * @generated from enum value: SESSION_STATE_FILTER_ACTIVE = 1;
     */
    ACTIVE = 1,
    /**
     * Ended sessions.
     *
     * @generated from enum value: SESSION_STATE_FILTER_ENDED = 2;
     */
    ENDED = 2
}
/**
 * Describes the enum toolwire.v1.SessionStateFilter.
 */
export declare const SessionStateFilterSchema: GenEnum<SessionStateFilter>;
/**
 * DispatcherService is the API agent services call: Connect, gRPC, gRPC-Web
 * and JSON over HTTP/1.1 from one handler. The caller's tenant, agent and
 * scopes come from its credentials.
 *
 * @generated from service toolwire.v1.DispatcherService
 */
export declare const DispatcherService: GenService<{
    /**
     * Call admits a call and waits for its terminal response (or the wait).
     *
     * @generated from rpc toolwire.v1.DispatcherService.Call
     */
    call: {
        methodKind: "unary";
        input: typeof CallRequestSchema;
        output: typeof CallResponseSchema;
    };
    /**
     * Submit admits a call and returns its id without waiting.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Submit
     */
    submit: {
        methodKind: "unary";
        input: typeof SubmitRequestSchema;
        output: typeof SubmitResponseSchema;
    };
    /**
     * GetResult returns the terminal response of a call, from any replica.
     * A call id the caller's tenant does not hold (made up, another
     * tenant's, its records gone) is NOT_FOUND, on every RPC alike.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetResult
     */
    getResult: {
        methodKind: "unary";
        input: typeof GetResultRequestSchema;
        output: typeof GetResultResponseSchema;
    };
    /**
     * Watch streams the lifecycle and progress events of a call.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Watch
     */
    watch: {
        methodKind: "server_streaming";
        input: typeof WatchRequestSchema;
        output: typeof WatchResponseSchema;
    };
    /**
     * GetDelegation returns a call's place in its delegation chain
     * (docs/delegation.md): its ancestors up to the root and its direct
     * children, only calls of the caller's tenant that the caller may see.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetDelegation
     */
    getDelegation: {
        methodKind: "unary";
        input: typeof GetDelegationRequestSchema;
        output: typeof GetDelegationResponseSchema;
    };
    /**
     * Cancel asks for a call to stop. Twice, late or unknown is harmless.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Cancel
     */
    cancel: {
        methodKind: "unary";
        input: typeof CancelRequestSchema;
        output: typeof CancelResponseSchema;
    };
    /**
     * ListTools lists the tools the caller may use, in a provider's format.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListTools
     */
    listTools: {
        methodKind: "unary";
        input: typeof ListToolsRequestSchema;
        output: typeof ListToolsResponseSchema;
    };
    /**
     * GetTool returns one tool's spec.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetTool
     */
    getTool: {
        methodKind: "unary";
        input: typeof GetToolRequestSchema;
        output: typeof GetToolResponseSchema;
    };
    /**
     * ApproveTool re-enables a tool whose definition changed after it was
     * registered (an MCP server's tool), approving exactly the definition
     * hash given. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ApproveTool
     */
    approveTool: {
        methodKind: "unary";
        input: typeof ApproveToolRequestSchema;
        output: typeof ApproveToolResponseSchema;
    };
    /**
     * GetSession returns the state the reference applier keeps for one
     * session of the caller's tenant.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetSession
     */
    getSession: {
        methodKind: "unary";
        input: typeof GetSessionRequestSchema;
        output: typeof GetSessionResponseSchema;
    };
    /**
     * ApplyIntents applies the intents of a finished call to the call's
     * session, each exactly once (safe to repeat), and returns the session.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ApplyIntents
     */
    applyIntents: {
        methodKind: "unary";
        input: typeof ApplyIntentsRequestSchema;
        output: typeof ApplyIntentsResponseSchema;
    };
    /**
     * SetSessionMode sets the mode of a session of the caller's tenant (a
     * mode the policy in force declares; empty = none), as a SET_MODE intent
     * applied by the reference applier, and returns the session.
     *
     * @generated from rpc toolwire.v1.DispatcherService.SetSessionMode
     */
    setSessionMode: {
        methodKind: "unary";
        input: typeof SetSessionModeRequestSchema;
        output: typeof SetSessionModeResponseSchema;
    };
    /**
     * ListSessions lists the sessions of the caller's tenant, a page at a
     * time, in the order they were last updated (oldest first), each
     * without its log, state values and applied keys (GetSession reads
     * them). Under agent visibility "own" it needs the admin or approve
     * scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListSessions
     */
    listSessions: {
        methodKind: "unary";
        input: typeof ListSessionsRequestSchema;
        output: typeof ListSessionsResponseSchema;
    };
    /**
     * EndSession ends a session of the caller's tenant, as an END_SESSION
     * intent applied by the reference applier: its later calls are refused
     * SESSION_INACTIVE. Ending an ended session changes nothing and answers
     * its state. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.EndSession
     */
    endSession: {
        methodKind: "unary";
        input: typeof EndSessionRequestSchema;
        output: typeof EndSessionResponseSchema;
    };
    /**
     * ClearSessionPins clears the spec versions a session pinned (all, or
     * one tool's), so that the session's next call of a tool pins the
     * version current then; returns the session. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ClearSessionPins
     */
    clearSessionPins: {
        methodKind: "unary";
        input: typeof ClearSessionPinsRequestSchema;
        output: typeof ClearSessionPinsResponseSchema;
    };
    /**
     * GetOutput reads the whole output text of a finished call of the
     * caller's tenant, also when the response was truncated: a byte range,
     * or the lines matching a pattern.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetOutput
     */
    getOutput: {
        methodKind: "unary";
        input: typeof GetOutputRequestSchema;
        output: typeof GetOutputResponseSchema;
    };
    /**
     * ListApprovals lists the approvals of the caller's tenant, newest
     * first. Needs the "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListApprovals
     */
    listApprovals: {
        methodKind: "unary";
        input: typeof ListApprovalsRequestSchema;
        output: typeof ListApprovalsResponseSchema;
    };
    /**
     * GetApproval returns one approval. Needs the "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetApproval
     */
    getApproval: {
        methodKind: "unary";
        input: typeof GetApprovalRequestSchema;
        output: typeof GetApprovalResponseSchema;
    };
    /**
     * Approve approves a parked call, once or as a grant for its session,
     * agent or tenant; the call is then published. Needs the "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Approve
     */
    approve: {
        methodKind: "unary";
        input: typeof ApproveRequestSchema;
        output: typeof ApproveResponseSchema;
    };
    /**
     * Deny denies a parked call; its caller gets PERMISSION_DENIED with the
     * reason. Needs the "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Deny
     */
    deny: {
        methodKind: "unary";
        input: typeof DenyRequestSchema;
        output: typeof DenyResponseSchema;
    };
    /**
     * ListGrants lists the standing grants of the caller's tenant. Needs the
     * "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListGrants
     */
    listGrants: {
        methodKind: "unary";
        input: typeof ListGrantsRequestSchema;
        output: typeof ListGrantsResponseSchema;
    };
    /**
     * RevokeGrant removes a grant. Needs the "approve" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.RevokeGrant
     */
    revokeGrant: {
        methodKind: "unary";
        input: typeof RevokeGrantRequestSchema;
        output: typeof RevokeGrantResponseSchema;
    };
    /**
     * ApplyPolicy stores a policy document for the caller's tenant and puts
     * it in force on every replica. A document that does not parse, or whose
     * tests fail, is refused. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ApplyPolicy
     */
    applyPolicy: {
        methodKind: "unary";
        input: typeof ApplyPolicyRequestSchema;
        output: typeof ApplyPolicyResponseSchema;
    };
    /**
     * RemovePolicy takes the caller's tenant's own document out of force:
     * the tenant is then under the installation document again (or under no
     * policy). Its history stays. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.RemovePolicy
     */
    removePolicy: {
        methodKind: "unary";
        input: typeof RemovePolicyRequestSchema;
        output: typeof RemovePolicyResponseSchema;
    };
    /**
     * GetPolicy returns the policy document in force for the caller's
     * tenant, or one version of it. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetPolicy
     */
    getPolicy: {
        methodKind: "unary";
        input: typeof GetPolicyRequestSchema;
        output: typeof GetPolicyResponseSchema;
    };
    /**
     * ListPolicyVersions lists the documents applied for the caller's
     * tenant, newest first. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListPolicyVersions
     */
    listPolicyVersions: {
        methodKind: "unary";
        input: typeof ListPolicyVersionsRequestSchema;
        output: typeof ListPolicyVersionsResponseSchema;
    };
    /**
     * GetUsage reads the limits in force for the caller's tenant: each
     * limit's rate, concurrency (calls running) and budget (used, remaining,
     * reset) for the caller's own agent, or, with the "admin" scope, another
     * agent, session, user or run of the tenant.
     *
     * @generated from rpc toolwire.v1.DispatcherService.GetUsage
     */
    getUsage: {
        methodKind: "unary";
        input: typeof GetUsageRequestSchema;
        output: typeof GetUsageResponseSchema;
    };
    /**
     * Explain decides a call as admission would, without running it, and
     * says why. Needs the "admin" scope.
     *
     * @generated from rpc toolwire.v1.DispatcherService.Explain
     */
    explain: {
        methodKind: "unary";
        input: typeof ExplainRequestSchema;
        output: typeof ExplainResponseSchema;
    };
    /**
     * ListPools lists the worker pools as the answering dispatcher last
     * read them, with their pauses. Needs the "installation" scope: pools
     * serve every tenant.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ListPools
     */
    listPools: {
        methodKind: "unary";
        input: typeof ListPoolsRequestSchema;
        output: typeof ListPoolsResponseSchema;
    };
    /**
     * PausePool pauses a pool for every replica and worker until
     * ResumePool: its workers are delivered no call, its queued calls wait,
     * new calls to it are refused OVERLOADED. Recorded with the caller and
     * the reason. Needs the "admin" and "installation" scopes.
     *
     * @generated from rpc toolwire.v1.DispatcherService.PausePool
     */
    pausePool: {
        methodKind: "unary";
        input: typeof PausePoolRequestSchema;
        output: typeof PausePoolResponseSchema;
    };
    /**
     * ResumePool ends a pool's pause. Needs the "admin" and "installation"
     * scopes.
     *
     * @generated from rpc toolwire.v1.DispatcherService.ResumePool
     */
    resumePool: {
        methodKind: "unary";
        input: typeof ResumePoolRequestSchema;
        output: typeof ResumePoolResponseSchema;
    };
}>;
