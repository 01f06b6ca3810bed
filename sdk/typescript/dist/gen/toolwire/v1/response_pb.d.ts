import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { Content } from "./content_pb.js";
import type { ToolError } from "./error_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/response.proto.
 */
export declare const file_toolwire_v1_response: GenFile;
/**
 * ToolResponse is the terminal answer to a call, published once on
 * `<prefix>.result.<tenant>.<dispatcher>.<call_id>`.
 *
 * @generated from message toolwire.v1.ToolResponse
 */
export type ToolResponse = Message<"toolwire.v1.ToolResponse"> & {
    /**
     * Envelope version; this contract writes 1.
     *
     * @generated from field: uint32 envelope_version = 1;
     */
    envelopeVersion: number;
    /**
     * @generated from field: string call_id = 2;
     */
    callId: string;
    /**
     * @generated from field: bool ok = 3;
     */
    ok: boolean;
    /**
     * @generated from field: repeated toolwire.v1.Content content = 4;
     */
    content: Content[];
    /**
     * Structured output as exact JSON text; empty when the tool gave none.
     *
     * @generated from field: string structured_json = 5;
     */
    structuredJson: string;
    /**
     * Set when ok is false.
     *
     * @generated from field: toolwire.v1.ToolError error = 6;
     */
    error?: ToolError | undefined;
    /**
     * State changes the orchestrator applies, in order.
     *
     * @generated from field: repeated toolwire.v1.Intent intents = 7;
     */
    intents: Intent[];
    /**
     * @generated from field: toolwire.v1.ResponseMeta meta = 8;
     */
    meta?: ResponseMeta | undefined;
    /**
     * @generated from field: string tool = 9;
     */
    tool: string;
    /**
     * The tool's own metadata of the result (MCP's result `_meta`), as JSON
     * text; empty when it gave none.
     *
     * @generated from field: string meta_json = 10;
     */
    metaJson: string;
    /**
     * The tool needs its caller's input before it can finish: ok is true,
     * content empty, and the caller answers with a new call that continues
     * this one (CallRequest.continues). Unset for every other response.
     *
     * @generated from field: toolwire.v1.InputRequired input_required = 11;
     */
    inputRequired?: InputRequired | undefined;
};
/**
 * Describes the message toolwire.v1.ToolResponse.
 * Use `create(ToolResponseSchema)` to create a new message.
 */
export declare const ToolResponseSchema: GenMessage<ToolResponse>;
/**
 * InputRequired is a tool's request for its caller's input (MCP's
 * InputRequiredResult, SEP-2322).
 *
 * @generated from message toolwire.v1.InputRequired
 */
export type InputRequired = Message<"toolwire.v1.InputRequired"> & {
    /**
     * What to ask, by keys the tool chose; the answers come back under them.
     *
     * @generated from field: map<string, toolwire.v1.InputRequest> requests = 1;
     */
    requests: {
        [key: string]: InputRequest;
    };
    /**
     * The tool's own state, handed back to it with the answers
     * (InputRound.state), read from the stored response: a caller cannot
     * alter it (it can read it). At most 64 KiB.
     *
     * @generated from field: bytes state = 2;
     */
    state: Uint8Array;
    /**
     * The SHA-256 of the arguments the caller sent; the answering call must
     * send the same.
     *
     * @generated from field: bytes args_sha256 = 3;
     */
    argsSha256: Uint8Array;
};
/**
 * Describes the message toolwire.v1.InputRequired.
 * Use `create(InputRequiredSchema)` to create a new message.
 */
export declare const InputRequiredSchema: GenMessage<InputRequired>;
/**
 * InputRequest is one thing a tool asks its caller for: an MCP request
 * the client answers ("elicitation/create", "sampling/createMessage",
 * "roots/list") with its params.
 *
 * @generated from message toolwire.v1.InputRequest
 */
export type InputRequest = Message<"toolwire.v1.InputRequest"> & {
    /**
     * @generated from field: string method = 1;
     */
    method: string;
    /**
     * The request's params as a JSON object.
     *
     * @generated from field: string params_json = 2;
     */
    paramsJson: string;
};
/**
 * Describes the message toolwire.v1.InputRequest.
 * Use `create(InputRequestSchema)` to create a new message.
 */
export declare const InputRequestSchema: GenMessage<InputRequest>;
/**
 * Intent is a state change a tool asks the orchestrator to make. Built-in
 * types: END_SESSION, SUPPRESS_AUDIO, SUPPRESS_TRANSCRIPT,
 * SET_PENDING_MESSAGE, SET_STATE, EMIT_EVENT, NOTIFY, INJECT_CONTEXT; custom
 * types are namespaced (`acme.reindex`).
 *
 * @generated from message toolwire.v1.Intent
 */
export type Intent = Message<"toolwire.v1.Intent"> & {
    /**
     * Unique within the call; appliers remember it to apply each once.
     *
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * @generated from field: string type = 2;
     */
    type: string;
    /**
     * Payload as JSON text.
     *
     * @generated from field: string payload_json = 3;
     */
    payloadJson: string;
};
/**
 * Describes the message toolwire.v1.Intent.
 * Use `create(IntentSchema)` to create a new message.
 */
export declare const IntentSchema: GenMessage<Intent>;
/**
 * ResponseMeta records how the response was produced.
 *
 * @generated from message toolwire.v1.ResponseMeta
 */
export type ResponseMeta = Message<"toolwire.v1.ResponseMeta"> & {
    /**
     * Worker instance that produced the response; empty for the dispatcher.
     *
     * @generated from field: string worker = 1;
     */
    worker: string;
    /**
     * The attempt that produced the response, from 1; 0 when the worker
     * answered before it took one (refused, cancelled or expired before it
     * started, unknown outcome, denied by the policy). A dead letter's
     * answer (source "dlq") gives the deliveries made, 0 when unknown.
     *
     * @generated from field: int32 attempt = 2;
     */
    attempt: number;
    /**
     * @generated from field: google.protobuf.Timestamp started_at = 3;
     */
    startedAt?: Timestamp | undefined;
    /**
     * @generated from field: google.protobuf.Timestamp finished_at = 4;
     */
    finishedAt?: Timestamp | undefined;
    /**
     * @generated from field: google.protobuf.Duration duration = 5;
     */
    duration?: Duration | undefined;
    /**
     * Output was cut to the inline limits (the tool's limits.max_output_*
     * and the worker's inline limit, keeping the head or the tail as
     * limits.truncate says); full_output holds all of it.
     *
     * @generated from field: bool truncated = 6;
     */
    truncated: boolean;
    /**
     * The whole response (a ToolResponse, binary protobuf) when truncated.
     *
     * @generated from field: toolwire.v1.BlobRef full_output = 7;
     */
    fullOutput?: BlobRef | undefined;
    /**
     * @generated from field: string spec_version = 8;
     */
    specVersion: string;
    /**
     * @generated from field: google.protobuf.Timestamp accepted_at = 9;
     */
    acceptedAt?: Timestamp | undefined;
    /**
     * Who cancelled the call and why (the tombstone expires, this stays).
     *
     * @generated from field: string cancelled_by = 10;
     */
    cancelledBy: string;
    /**
     * @generated from field: string cancel_reason = 11;
     */
    cancelReason: string;
    /**
     * Isolation mechanisms the host lacked for this execution.
     *
     * @generated from field: repeated string isolation_gaps = 12;
     */
    isolationGaps: string[];
    /**
     * Which component answered: "worker", "dispatcher" (admission), "dlq".
     *
     * @generated from field: string source = 13;
     */
    source: string;
    /**
     * The caller's session (from the call), so that intents can be applied
     * to it and audits can filter by it.
     *
     * @generated from field: string session = 14;
     */
    session: string;
    /**
     * The text of the whole output when truncated: its text blocks joined by
     * newlines (its structured JSON when it has no text block), UTF-8.
     * DispatcherService.GetOutput reads it by offset, limit and pattern.
     *
     * @generated from field: toolwire.v1.BlobRef full_text = 15;
     */
    fullText?: BlobRef | undefined;
    /**
     * The loop guard warned: this exact call (tool and canonical arguments)
     * was made this many times in a row in its session. 0 otherwise.
     *
     * @generated from field: int32 loop_count = 16;
     */
    loopCount: number;
    /**
     * What the after-hooks did to the response, in the order they ran.
     *
     * @generated from field: repeated toolwire.v1.HookNote hooks = 17;
     */
    hooks: HookNote[];
    /**
     * Set when the call took longer than its soft latency budget (its
     * spec's timeouts.latency_budget or the policy's latency_budgets): the
     * call still succeeded or failed on its own. Set by the dispatcher on
     * every answer of the call (Call, GetResult, a Watch's FINISHED),
     * measured against ToolCall.latency_budget; the call's timeline holds
     * the same as a LATENCY_BUDGET_EXCEEDED event.
     *
     * @generated from field: toolwire.v1.LatencyBudgetExceeded latency_budget_exceeded = 18;
     */
    latencyBudgetExceeded?: LatencyBudgetExceeded | undefined;
};
/**
 * Describes the message toolwire.v1.ResponseMeta.
 * Use `create(ResponseMetaSchema)` to create a new message.
 */
export declare const ResponseMetaSchema: GenMessage<ResponseMeta>;
/**
 * LatencyBudgetExceeded records a call that took longer than its soft
 * latency budget (docs/policy.md, "Latency budgets").
 *
 * @generated from message toolwire.v1.LatencyBudgetExceeded
 */
export type LatencyBudgetExceeded = Message<"toolwire.v1.LatencyBudgetExceeded"> & {
    /**
     * The budget the call was held to: the tightest that applied.
     *
     * @generated from field: google.protobuf.Duration budget = 1;
     */
    budget?: Duration | undefined;
    /**
     * How long the call took, as the dispatcher measured it: from its
     * admission (ToolCall.accepted_at, the dispatcher's clock) to the
     * storage of its result in the results stream (the stream's timestamp).
     *
     * @generated from field: google.protobuf.Duration elapsed = 2;
     */
    elapsed?: Duration | undefined;
    /**
     * Where the budget came from: "spec" (the tool spec's
     * timeouts.latency_budget) or "policy" (an entry of the policy's
     * latency_budgets).
     *
     * @generated from field: string source = 3;
     */
    source: string;
    /**
     * The policy entry's id (latency_budgets[i] when it has none); empty
     * for the spec's budget.
     *
     * @generated from field: string entry = 4;
     */
    entry: string;
    /**
     * The version of the policy that set the budget; empty for the spec's.
     *
     * @generated from field: string policy_version = 5;
     */
    policyVersion: string;
    /**
     * The session mode the budget was chosen for; empty when the entry
     * names no mode.
     *
     * @generated from field: string mode = 6;
     */
    mode: string;
};
/**
 * Describes the message toolwire.v1.LatencyBudgetExceeded.
 * Use `create(LatencyBudgetExceededSchema)` to create a new message.
 */
export declare const LatencyBudgetExceededSchema: GenMessage<LatencyBudgetExceeded>;
/**
 * HookNote records one after-hook's look at a response.
 *
 * @generated from message toolwire.v1.HookNote
 */
export type HookNote = Message<"toolwire.v1.HookNote"> & {
    /**
     * The hook's id in the policy document.
     *
     * @generated from field: string hook = 1;
     */
    hook: string;
    /**
     * continue, annotate, redact, replace, withhold; failed (the hook gave
     * no answer, and its failure mode decided); unbound (no longer bound by
     * the policy in force, so it did not run).
     *
     * @generated from field: string action = 2;
     */
    action: string;
    /**
     * @generated from field: string reason = 3;
     */
    reason: string;
    /**
     * What an annotating hook said of the response.
     *
     * @generated from field: map<string, string> annotations = 4;
     */
    annotations: {
        [key: string]: string;
    };
    /**
     * The policy version that bound the hook when it ran.
     *
     * @generated from field: string policy_version = 5;
     */
    policyVersion: string;
};
/**
 * Describes the message toolwire.v1.HookNote.
 * Use `create(HookNoteSchema)` to create a new message.
 */
export declare const HookNoteSchema: GenMessage<HookNote>;
/**
 * BlobRef names an object in the blob Object Store.
 *
 * @generated from message toolwire.v1.BlobRef
 */
export type BlobRef = Message<"toolwire.v1.BlobRef"> & {
    /**
     * @generated from field: string bucket = 1;
     */
    bucket: string;
    /**
     * @generated from field: string name = 2;
     */
    name: string;
    /**
     * @generated from field: int64 size = 3;
     */
    size: bigint;
    /**
     * Hex SHA-256 of the object.
     *
     * @generated from field: string sha256 = 4;
     */
    sha256: string;
    /**
     * @generated from field: string mime_type = 5;
     */
    mimeType: string;
};
/**
 * Describes the message toolwire.v1.BlobRef.
 * Use `create(BlobRefSchema)` to create a new message.
 */
export declare const BlobRefSchema: GenMessage<BlobRef>;
