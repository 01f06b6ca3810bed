import { type FunctionTool } from "@openai/agents";
import type { Client } from "../client.js";
import { type CallsOptions } from "./calls.js";
export type { CallsOptions as AgentsToolsOptions } from "./calls.js";
/** The caller's tools as Agents SDK function tools. */
export declare function agentsTools(client: Client, options?: CallsOptions): Promise<FunctionTool[]>;
