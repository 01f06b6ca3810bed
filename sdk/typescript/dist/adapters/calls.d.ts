import type { Client } from "../client.js";
import type { Args } from "../client.js";
export interface CallsOptions {
    /** The session every call belongs to (and whose mode filters the tools). */
    session?: string;
    /** Only the tools whose names match this glob. */
    nameGlob?: string;
    /** Seconds a tool call waits for its result (60). */
    wait?: number;
    /** Told each toolwire call's id as soon as it is known, with the framework's tool call id. */
    onCall?: (toolCallId: string, callId: string) => void;
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
    /** Decide a tool call ahead of the framework's approval step, by submitting it. */
    decide(tool: string, args: Args, toolCallId: string): Promise<Decision>;
    /** Run a tool call: its structured content or text; a tool error is thrown. An abort cancels the call. */
    run(tool: string, args: Args, toolCallId: string, signal?: AbortSignal): Promise<unknown>;
    private remember;
    /** A submitted call's result, waited for up to `wait` seconds; an abort cancels the call. */
    private await;
}
