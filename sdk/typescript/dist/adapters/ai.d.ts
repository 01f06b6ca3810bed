import { type ToolSet } from "ai";
import type { Client } from "../client.js";
/** The AI SDK's approval answers (ToolApprovalStatus). */
export type ApprovalStatus = {
    type: "not-applicable";
} | {
    type: "user-approval";
    reason?: string;
} | {
    type: "denied";
    reason?: string;
};
export interface AiToolsOptions {
    /** The session every call belongs to (and whose mode filters the tools). */
    session?: string;
    /** Only the tools whose names match this glob. */
    nameGlob?: string;
    /** Seconds execute waits for a call's result (60). */
    wait?: number;
    /** Told each toolwire call's id as soon as it is known, with the SDK's tool call id. */
    onCall?: (toolCallId: string, callId: string) => void;
}
export interface AiTools {
    tools: ToolSet;
    /** generateText's / streamText's / ToolLoopAgent's toolApproval. */
    toolApproval: (options: {
        toolCall: {
            toolCallId: string;
            toolName: string;
            input: unknown;
        };
    }) => Promise<ApprovalStatus | undefined>;
}
/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export declare function aiTools(client: Client, options?: AiToolsOptions): Promise<AiTools>;
