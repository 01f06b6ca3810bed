import { type FunctionTool } from "@openai/agents";
import type { Client } from "../client.js";
import { type CallsOptions } from "./calls.js";
export type { CallsOptions as AgentsToolsOptions } from "./calls.js";
/** A tool approval item's raw tool call (RunToolApprovalItem.rawItem of a function call). */
export interface ApprovalItem {
    rawItem: unknown;
}
/** The tools, and reject: cancel the parked call of a tool approval item the user rejected (state.reject). */
export type AgentsTools = FunctionTool[] & {
    reject: (item: ApprovalItem, reason?: string) => Promise<void>;
};
/** The caller's tools as Agents SDK function tools. */
export declare function agentsTools(client: Client, options?: CallsOptions): Promise<AgentsTools>;
