import { type Client as RpcClient } from "@connectrpc/connect";
import { DispatcherService } from "./gen/toolwire/v1/dispatcher_pb.js";
import { CallEvent, Result, type ApplyIntentsResult, type Approval, type ApproveResult, type Grant, type Session, type Submission, type ToolSpec, type Usage } from "./types.js";
/** Largest answer (or stream message) the client reads; a longer one is refused before it is read whole. */
export declare const MAX_MESSAGE_BYTES: number;
/** Seconds a request is given beyond the wait the dispatcher is asked for, so that it answers PENDING first. */
export declare const HEADROOM = 10;
/** A call's arguments: an object (encoded with JSON.stringify) or JSON text (sent byte for byte: big integers survive). */
/** Seconds the Cancel sent after an abort may take: short, so that the abort is prompt (5, or the client's timeout when shorter). */
export declare function abortCancelTimeout(timeout: number): number;
export type Args = string | Uint8Array | Record<string, unknown> | unknown[] | undefined;
export interface ClientOptions {
    /** Authenticates every request as a bearer key; the dispatcher derives tenant, agent and scopes from it. */
    apiKey?: string;
    /** Seconds each request that does not wait on the server may take (30). */
    timeout?: number;
    /** Connect's JSON instead of binary protobuf on the wire. */
    json?: boolean;
    /** At most this many connections to the dispatcher (100); a request beyond waits for one. HTTP/1.1 only. */
    maxConns?: number;
    /**
     * The HTTP version: "1.1" (the default: keep-alive connections, up to
     * maxConns) or "2" (one connection multiplexing every request and watch:
     * with prior knowledge on http://, negotiated by TLS on https://). HTTP/2
     * costs the client less CPU a call, so more calls a second when the
     * client's CPU is what limits it (BENCHMARKS.md); the dispatcher serves
     * both on one port, but a proxy in between must speak HTTP/2 to it.
     */
    httpVersion?: "1.1" | "2";
    /**
     * The largest answer (or stream message) read, and request sent, in
     * bytes: a longer answer is refused (TransportError "resource_exhausted")
     * before it is read whole. At most, and by default, MAX_MESSAGE_BYTES.
     */
    maxMessageBytes?: number;
}
/** Options of every request. */
export interface RequestOptions {
    /** Seconds the request may take (the client's timeout; for call and getResult, their wait plus a headroom). */
    timeout?: number;
    /** Aborts the request; it then rejects with the signal's reason. For call, also cancels the call. */
    signal?: AbortSignal;
}
/** Options of call and submit (the CallRequest's fields; durations in seconds). */
export interface SubmitOptions extends RequestOptions {
    session?: string;
    user?: string;
    run?: string;
    turn?: string;
    idempotencyKey?: string;
    specVersion?: string;
    /** Redeem an approval token (ApprovalRequiredError.token). */
    approvalToken?: string;
    scheduleToStart?: number;
    scheduleToClose?: number;
    pinSessionVersions?: boolean;
    parentCallId?: string;
    /** The model the call is made for (docs/toolsets.md): held to what listTools offers that model. */
    model?: string;
}
/** Options of listTools and exportTools. */
export interface ListOptions extends RequestOptions {
    /** The session whose mode decides what is listed. */
    session?: string;
    /** The model the list is for: its family's toolset applies (docs/toolsets.md). */
    model?: string;
}
export interface CallOptions extends SubmitOptions {
    /** Seconds to wait for the terminal response (60); the call keeps running after. */
    wait?: number;
    /** Apply the call's intents to its session (Result.session, Result.applyError). */
    applyIntents?: boolean;
    /** Wait through an approval instead of throwing ApprovalRequiredError (not with a signal). */
    waitForApproval?: boolean;
    /** Told the call's id as soon as it is known (with a signal: after the submission). */
    onSubmitted?: (callId: string) => void;
}
export interface WatchOptions {
    /** Events an earlier watch yielded: skipped (resume after them). */
    after?: CallEvent[];
    /** Times in a row the stream is opened again when it breaks before the terminal event (3). */
    resume?: number;
    signal?: AbortSignal;
}
export interface ApproveOptions extends RequestOptions {
    /** "once" (the default), or a grant covering later calls: "session", "agent", "tenant". */
    scope?: "once" | "session" | "agent" | "tenant";
    reason?: string;
    argsPattern?: Record<string, string>;
    /** Seconds the grant lasts. */
    ttl?: number;
    tool?: string;
}
/** Arguments as exact JSON text. */
export declare function encodeArgs(args: Args): string | undefined;
/**
 * A client of a toolwire dispatcher's API. `baseUrl` is the dispatcher's
 * address, e.g. "http://127.0.0.1:8080" (a path prefix is kept, for a
 * dispatcher behind a reverse proxy). Safe for concurrent use: create one
 * per dispatcher and share it; close() closes every connection it holds.
 */
export declare class Client {
    /** The generated Connect client, for an RPC this layer does not cover. */
    readonly rpc: RpcClient<typeof DispatcherService>;
    readonly timeout: number;
    /** The client's own path for the unary RPCs (Connect's unary protocol without connect-es's per-call machinery). */
    private readonly wire;
    /** The HTTP/1.1 connections, or the HTTP/2 connection (httpVersion "2"). */
    private readonly agent?;
    private readonly session?;
    constructor(baseUrl: string, options?: ClientOptions);
    /**
     * Close every connection, idle or in use: requests and watches in flight
     * fail (with TransportError). Later requests open new connections.
     */
    close(): void;
    /** An RPC, its failures as TransportError (or what notFound makes of a not_found), an abort as the signal's reason. */
    private unary;
    private failure;
    private opts;
    private request;
    /**
     * Call `tool` with `args` and wait for its terminal response, at most
     * `wait` seconds (the call keeps running after). A tool error is an
     * answer: the Result's `error` holds it. Throws PendingError when the wait
     * ended first, ApprovalRequiredError when the call is parked for an
     * approver, TransportError when there is no answer.
     *
     * With a `signal`, the call is submitted and its result awaited, so that
     * an abort cancels the call on the fabric (reason "aborted by the
     * caller") besides ending the wait.
     */
    call(tool: string, args?: Args, o?: CallOptions): Promise<Result>;
    private callAbortable;
    /**
     * Submit a call without waiting. A call refused at admission is not an
     * error: Submission.result says why; a parked call has Submission.approval.
     */
    submit(tool: string, args?: Args, o?: SubmitOptions): Promise<Submission>;
    /**
     * The terminal response of a call, waiting up to `wait` seconds for a
     * pending one (0). Throws PendingError, UnknownCallError,
     * ApprovalRequiredError or TransportError as call does.
     */
    getResult(callId: string, o?: RequestOptions & {
        wait?: number;
    }): Promise<Result>;
    /**
     * Ask a call to stop: a queued call never runs, a running one has its
     * context cancelled and answers CANCELLED. Returns "REQUESTED",
     * "ALREADY_FINISHED" or "UNKNOWN_CALL"; twice, late or unknown is harmless.
     */
    cancel(callId: string, reason?: string, o?: RequestOptions): Promise<string>;
    /**
     * The call's lifecycle and progress events, from its admission on
     * (earlier events are replayed), up to its terminal event (FINISHED with
     * `event.result`, or REJECTED).
     *
     * Resumable: when the stream breaks before the terminal event it is
     * opened again, up to `resume` times in a row, and the events already
     * yielded are skipped; `after` (events an earlier watch yielded) skips
     * those too. Throws UnknownCallError for an id the dispatcher does not
     * know, WatchEndedError when resuming failed, TransportError for a
     * failure another try would meet again. Breaking out of the loop, or the
     * signal, closes the stream.
     */
    watch(callId: string, o?: WatchOptions): AsyncGenerator<CallEvent, void, undefined>;
    /**
     * The tools the caller may use (its scopes, the policy, the session's mode), optionally those matching a name glob.
     * With `model`, the tools that model is offered (docs/toolsets.md): its family's toolset hides, substitutes and
     * narrows (a variant's input schema); pass the same model to `call`.
     */
    listTools(nameGlob?: string, o?: ListOptions): Promise<ToolSpec[]>;
    /** The caller's tools as a provider's tool list, decoded from JSON (with `model`, as listTools lists them). */
    exportTools(format: "openai" | "anthropic" | "gemini" | "mcp", nameGlob?: string, o?: ListOptions): Promise<unknown[]>;
    /**
     * One tool's spec (its current version, or `version`). With `model`, as listTools with that model lists it: a tool
     * the model's toolset hides or substitutes rejects with TransportError "not_found", a variant has its input schema.
     */
    getTool(name: string, version?: string, o?: RequestOptions & {
        model?: string;
    }): Promise<ToolSpec>;
    /** The state the reference applier keeps for a session. */
    getSession(name: string, o?: RequestOptions): Promise<Session>;
    /** Apply the intents of a finished call to its session, each exactly once (repeating applies nothing new). */
    applyIntents(callId: string, o?: RequestOptions): Promise<ApplyIntentsResult>;
    /** Set a session's mode (admin scope). */
    setSessionMode(name: string, mode: string, o?: RequestOptions): Promise<Session>;
    /** End a session: its later calls are refused SESSION_INACTIVE (admin scope). */
    endSession(name: string, reason?: string, o?: RequestOptions): Promise<Session>;
    /** Approvals of the caller's tenant, newest first (approve scope). */
    listApprovals(state?: "pending" | "approved" | "denied" | "expired", o?: RequestOptions & {
        tool?: string;
        session?: string;
        agent?: string;
        limit?: number;
    }): Promise<Approval[]>;
    /** One approval (approve scope). */
    getApproval(id: string, o?: RequestOptions): Promise<Approval>;
    /** Approve a parked call, once or (scope "session", "agent", "tenant") as a grant covering later calls (approve scope). */
    approve(id: string, o?: ApproveOptions): Promise<ApproveResult>;
    /** Deny a parked call; its caller gets PERMISSION_DENIED with the reason. */
    deny(id: string, reason: string, o?: RequestOptions): Promise<Approval>;
    /** The standing grants of the caller's tenant (approve scope). */
    listGrants(o?: RequestOptions & {
        agent?: string;
        session?: string;
    }): Promise<Grant[]>;
    /** Remove a grant; true when it existed. */
    revokeGrant(id: string, o?: RequestOptions): Promise<boolean>;
    /** Each limit of the policy in force as it stands for the caller's agent (or, with the admin scope, another agent, session, user or run). */
    usage(o?: RequestOptions & {
        agent?: string;
        session?: string;
        user?: string;
        run?: string;
    }): Promise<Usage>;
}
