import { type Args, type Client } from "../client.js";
export interface CallsOptions {
    /** The session every call belongs to (and whose mode filters the tools). */
    session?: string;
    /** Only the tools whose names match this glob. */
    nameGlob?: string;
    /** Seconds a tool call waits for its result (60). */
    wait?: number;
    /**
     * Told each toolwire call's id as soon as it is known (a parked call's
     * too), with the framework's tool call id: what client.cancel takes.
     */
    onCall?: (toolCallId: string, callId: string) => void;
    /**
     * false: the framework's approval hook never submits (nothing starts
     * before execute); execute submits, and a call the policy parks is
     * reported to the model as waiting for a toolwire approver. true by default.
     */
    approvals?: boolean;
}
export type Decision = {
    kind: "ask" | "deny";
    reason: string;
} | {
    kind: "run";
};
export declare class Calls {
    private readonly client;
    private readonly options;
    private readonly pending;
    constructor(client: Client, options: CallsOptions);
    /** Whether decide() is used (the approvals option). */
    get approvals(): boolean;
    /** Decide a tool call ahead of the framework's approval step, by submitting it (once: its idempotency key). */
    decide(tool: string, args: Args, toolCallId: string): Promise<Decision>;
    /** Run a tool call: its structured content or text; a tool error is thrown. An abort cancels the call. */
    run(tool: string, args: Args, toolCallId: string, signal?: AbortSignal): Promise<unknown>;
    /**
     * The framework's user rejected a tool call: cancel the call decide()
     * parked for it, so that no toolwire approver can run it afterwards.
     * A tool call this object did not decide is left alone (onCall told its id).
     */
    reject(tool: string, args: Args, toolCallId: string, reason?: string): Promise<void>;
    private remember;
    /** A submitted call's result, waited for up to `wait` seconds; an abort cancels the call. */
    private await;
}
/**
 * The idempotency key of a tool call (and its pending state's key): the
 * SHA-256 of the session, the framework's tool call id, the tool and the
 * arguments (objects with their keys sorted).
 */
export declare function keyOf(session: string | undefined, toolCallId: string, tool: string, args: Args): string;
