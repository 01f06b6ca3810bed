import { type ToolSet } from "ai";
import type { Client } from "../client.js";
import { type CallsOptions } from "./calls.js";
export type { CallsOptions as AiToolsOptions } from "./calls.js";
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
export interface AiTools {
    tools: ToolSet;
    /** generateText's / streamText's / ToolLoopAgent's toolApproval. */
    toolApproval: (options: {
        toolCall: {
            toolCallId: string;
            toolName: string;
            input: unknown;
        };
        messages?: unknown[];
    }) => Promise<ApprovalStatus | undefined>;
    /**
     * Cancel the parked calls whose approval the user rejected in the last
     * message of `messages` (its tool-approval-responses with approved: false),
     * so that no toolwire approver can run them. Call it with the messages
     * that carry the user's answers, before generateText / streamText.
     */
    reject: (messages: unknown[]) => Promise<void>;
}
/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export declare function aiTools(client: Client, options?: CallsOptions): Promise<AiTools>;
