import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { ExecutorType } from "./spec_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/call.proto.
 */
export declare const file_toolwire_v1_call: GenFile;
/**
 * Caller says on whose behalf a call runs. tenant, agent and scopes come from
 * the credentials the dispatcher authenticated, never from a request body.
 *
 * @generated from message toolwire.v1.Caller
 */
export type Caller = Message<"toolwire.v1.Caller"> & {
    /**
     * @generated from field: string tenant = 1;
     */
    tenant: string;
    /**
     * @generated from field: string agent = 2;
     */
    agent: string;
    /**
     * @generated from field: string session = 3;
     */
    session: string;
    /**
     * @generated from field: string user = 4;
     */
    user: string;
    /**
     * @generated from field: string run = 5;
     */
    run: string;
    /**
     * @generated from field: repeated string scopes = 6;
     */
    scopes: string[];
    /**
     * Turn of the session, for per-turn budgets.
     *
     * @generated from field: string turn = 7;
     */
    turn: string;
    /**
     * The session's mode (SET_MODE) when the dispatcher admitted the call,
     * set by the dispatcher from the session's state, never by the caller;
     * empty = none. The policy reads it as caller.mode.
     *
     * @generated from field: string mode = 8;
     */
    mode: string;
    /**
     * The delegation chain (docs/delegation.md), set by the dispatcher from
     * the request's parent_call_id after checking it, never taken from the
     * caller otherwise. parent_call_id is the call on whose behalf this one
     * is made; root_call_id the first call of the chain (the parent's root,
     * or the parent itself); depth the number of calls above this one (0 =
     * no parent); parent_tool the parent call's tool. The policy reads them
     * as caller.parent_call_id, caller.root_call_id, caller.depth and
     * caller.parent.
     *
     * @generated from field: string parent_call_id = 9;
     */
    parentCallId: string;
    /**
     * @generated from field: string root_call_id = 10;
     */
    rootCallId: string;
    /**
     * @generated from field: int32 depth = 11;
     */
    depth: number;
    /**
     * @generated from field: string parent_tool = 12;
     */
    parentTool: string;
    /**
     * The model the agent service says chooses this call's tools
     * (docs/toolsets.md), from the request's model; and its family, derived
     * by the dispatcher from the model with the policy's model_families (or
     * the default: the model's leading letters, lowercased). A claim of the
     * agent service, not an identity: it selects which tools and schemas are
     * offered and never grants anything. The policy reads them as
     * caller.model and caller.model_family. Empty = not given.
     *
     * @generated from field: string model = 13;
     */
    model: string;
    /**
     * @generated from field: string model_family = 14;
     */
    modelFamily: string;
};
/**
 * Describes the message toolwire.v1.Caller.
 * Use `create(CallerSchema)` to create a new message.
 */
export declare const CallerSchema: GenMessage<Caller>;
/**
 * ToolCall is what a dispatcher publishes on
 * `<prefix>.call.<type>.<tenant>.<provider>.<tool>` and a worker executes.
 * Trace context travels in NATS headers, not here.
 *
 * @generated from message toolwire.v1.ToolCall
 */
export type ToolCall = Message<"toolwire.v1.ToolCall"> & {
    /**
     * ULID, unique per call; also the Nats-Msg-Id.
     *
     * @generated from field: string call_id = 1;
     */
    callId: string;
    /**
     * @generated from field: string tool = 2;
     */
    tool: string;
    /**
     * Spec version pinned at admission; a worker that does not know it
     * refuses the call.
     *
     * @generated from field: string spec_version = 3;
     */
    specVersion: string;
    /**
     * The arguments as the exact JSON bytes the caller sent.
     *
     * @generated from field: bytes arguments = 4;
     */
    arguments: Uint8Array;
    /**
     * @generated from field: toolwire.v1.Caller caller = 5;
     */
    caller?: Caller | undefined;
    /**
     * Tenant-scoped idempotency key, if the caller gave one.
     *
     * @generated from field: string idempotency_key = 6;
     */
    idempotencyKey: string;
    /**
     * Attempt being made, from 1; set by the worker for its responses.
     *
     * @generated from field: int32 attempt = 7;
     */
    attempt: number;
    /**
     * When the dispatcher accepted the call.
     *
     * @generated from field: google.protobuf.Timestamp accepted_at = 8;
     */
    acceptedAt?: Timestamp | undefined;
    /**
     * Not started by then -> EXPIRED, never executed late.
     *
     * @generated from field: google.protobuf.Timestamp schedule_to_start_deadline = 9;
     */
    scheduleToStartDeadline?: Timestamp | undefined;
    /**
     * Terminal result due by then (schedule-to-close).
     *
     * @generated from field: google.protobuf.Timestamp deadline = 10;
     */
    deadline?: Timestamp | undefined;
    /**
     * Longest single attempt; zero = the tool's or the worker's default.
     *
     * @generated from field: google.protobuf.Duration start_to_close = 11;
     */
    startToClose?: Duration | undefined;
    /**
     * Signed, single-use approval token bound to the arguments' hash.
     *
     * @generated from field: string approval_token = 12;
     */
    approvalToken: string;
    /**
     * Dispatcher that routes the result (a token of the result subject).
     *
     * @generated from field: string dispatcher = 13;
     */
    dispatcher: string;
    /**
     * @generated from field: toolwire.v1.ExecutorType executor = 14;
     */
    executor: ExecutorType;
    /**
     * `builtin` or the MCP server name.
     *
     * @generated from field: string provider = 15;
     */
    provider: string;
    /**
     * The approval that let the call run (the id of its record); the worker
     * checks the record before executing. Empty = none.
     *
     * @generated from field: string approval_id = 16;
     */
    approvalId: string;
    /**
     * The grant that covered the call; the worker checks it too.
     *
     * @generated from field: string grant_id = 17;
     */
    grantId: string;
    /**
     * The policy version and rule that admitted the call, for the audit.
     *
     * @generated from field: string policy_version = 18;
     */
    policyVersion: string;
    /**
     * @generated from field: string policy_rule = 19;
     */
    policyRule: string;
    /**
     * The loop guard warned (docs/policy.md, "Loop guard"): this exact call
     * was made this many times in a row in its session; the worker copies it
     * into the response's meta. 0 otherwise.
     *
     * @generated from field: int32 loop_count = 20;
     */
    loopCount: number;
    /**
     * The after-hooks the policy in force bound to the call's tool when it
     * was admitted (docs/policy.md, "Hooks"), in the order they run: the
     * worker has a dispatcher run them on its response before it is stored.
     *
     * @generated from field: repeated toolwire.v1.AfterHookBinding after_hooks = 21;
     */
    afterHooks: AfterHookBinding[];
    /**
     * This call answers the input a tool asked for (docs/mcp.md, "Tools that
     * ask for input"); unset otherwise.
     *
     * @generated from field: toolwire.v1.InputRound input = 22;
     */
    input?: InputRound | undefined;
    /**
     * The client capabilities the caller declared, as a JSON object (MCP's
     * clientCapabilities: "elicitation", "sampling", "roots"), so that a
     * tool asks only for input the caller can give. Empty when the caller
     * declared none.
     *
     * @generated from field: string client_capabilities_json = 23;
     */
    clientCapabilitiesJson: string;
    /**
     * The SHA-256 of the arguments as the caller sent them, set only when a
     * before-hook rewrote them: an input-required response is bound to the
     * caller's arguments (InputRequired.args_sha256).
     *
     * @generated from field: bytes caller_args_sha256 = 24;
     */
    callerArgsSha256: Uint8Array;
    /**
     * The soft latency budget the dispatcher held the call to when it
     * admitted it (docs/policy.md, "Latency budgets"): the tightest of the
     * spec's and the policy's that applied. Unset when none did. Whoever
     * reads the call's result measures it against this, from accepted_at
     * to the result's storage, so every answer says the same.
     *
     * @generated from field: toolwire.v1.CallLatencyBudget latency_budget = 25;
     */
    latencyBudget?: CallLatencyBudget | undefined;
};
/**
 * Describes the message toolwire.v1.ToolCall.
 * Use `create(ToolCallSchema)` to create a new message.
 */
export declare const ToolCallSchema: GenMessage<ToolCall>;
/**
 * CallLatencyBudget is the soft latency budget a call was admitted with.
 *
 * @generated from message toolwire.v1.CallLatencyBudget
 */
export type CallLatencyBudget = Message<"toolwire.v1.CallLatencyBudget"> & {
    /**
     * @generated from field: google.protobuf.Duration soft = 1;
     */
    soft?: Duration | undefined;
    /**
     * "spec" or "policy", as LatencyBudgetExceeded.source.
     *
     * @generated from field: string source = 2;
     */
    source: string;
    /**
     * The policy entry's id; empty for the spec's budget.
     *
     * @generated from field: string entry = 3;
     */
    entry: string;
    /**
     * The version of the policy that set it; empty for the spec's.
     *
     * @generated from field: string policy_version = 4;
     */
    policyVersion: string;
    /**
     * The session mode the entry names; empty for any.
     *
     * @generated from field: string mode = 5;
     */
    mode: string;
};
/**
 * Describes the message toolwire.v1.CallLatencyBudget.
 * Use `create(CallLatencyBudgetSchema)` to create a new message.
 */
export declare const CallLatencyBudgetSchema: GenMessage<CallLatencyBudget>;
/**
 * InputRound is a call that continues an exchange in which the tool asked
 * its caller for input (an MCP input-required result, SEP-2322): the
 * dispatcher read the round before from the results stream and checked
 * that it is the same tenant's, tool's and arguments' and still fresh.
 *
 * @generated from message toolwire.v1.InputRound
 */
export type InputRound = Message<"toolwire.v1.InputRound"> & {
    /**
     * The call whose response asked for the input.
     *
     * @generated from field: string previous_call_id = 1;
     */
    previousCallId: string;
    /**
     * The tool's state from that response (InputRequired.state), as stored:
     * never bytes the caller sent.
     *
     * @generated from field: bytes state = 2;
     */
    state: Uint8Array;
    /**
     * The caller's answers, by the keys of the requests, each a JSON object
     * (an MCP ElicitResult, CreateMessageResult or ListRootsResult) as text.
     * Keys the round before did not ask for are dropped.
     *
     * @generated from field: map<string, string> responses_json = 3;
     */
    responsesJson: {
        [key: string]: string;
    };
};
/**
 * Describes the message toolwire.v1.InputRound.
 * Use `create(InputRoundSchema)` to create a new message.
 */
export declare const InputRoundSchema: GenMessage<InputRound>;
/**
 * AfterHookBinding names an after-hook a call was admitted with. A
 * dispatcher runs it as the policy in force binds it then; the worker
 * keeps the timeout and failure mode to bound its wait, and to decide
 * when no dispatcher answers.
 *
 * @generated from message toolwire.v1.AfterHookBinding
 */
export type AfterHookBinding = Message<"toolwire.v1.AfterHookBinding"> & {
    /**
     * The hook's id in the policy document.
     *
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * The registered tool that is the hook.
     *
     * @generated from field: string tool = 2;
     */
    tool: string;
    /**
     * @generated from field: google.protobuf.Duration timeout = 3;
     */
    timeout?: Duration | undefined;
    /**
     * The result is stored unchanged when the hook fails; false (the
     * default) withholds it.
     *
     * @generated from field: bool fail_open = 4;
     */
    failOpen: boolean;
};
/**
 * Describes the message toolwire.v1.AfterHookBinding.
 * Use `create(AfterHookBindingSchema)` to create a new message.
 */
export declare const AfterHookBindingSchema: GenMessage<AfterHookBinding>;
