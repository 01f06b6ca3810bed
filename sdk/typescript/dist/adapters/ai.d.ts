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
    }) => Promise<ApprovalStatus | undefined>;
}
/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export declare function aiTools(client: Client, options?: CallsOptions): Promise<AiTools>;
