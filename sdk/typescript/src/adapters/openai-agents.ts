// The fleet's tools as OpenAI Agents SDK for JS tools (`@openai/agents`):
// the tools the caller may use (ListTools) as tool() definitions (their
// JSON Schema, not strict) whose execute runs the call through toolwire,
// and whose needsApproval surfaces toolwire's approvals as the SDK's
// interruptions (calls.ts says how): an ask rule interrupts the run with a
// tool approval item; result.state.approve(item) and a run resumed from
// that state run the parked call, once. The SDK has no denial answer for
// needsApproval: a call the policy denies runs to its refusal, which the
// model reads as the tool's error. A toolwire error is given to the model
// as its message (the SDK's default hides it behind "An error occurred").
// A call the policy allows starts when needsApproval submits it, before
// the tool's input guardrails (calls.ts; `approvals: false` turns that
// off). The SDK calls no hook of the tool on a rejection: after
// result.state.reject(item), tools.reject(item) cancels the parked call,
// so that no toolwire approver can run it.

import { tool, type FunctionTool } from "@openai/agents";
import type { Args, Client } from "../client.js";
import { ToolwireError } from "../errors.js";
import { Calls, type CallsOptions } from "./calls.js";

export type { CallsOptions as AgentsToolsOptions } from "./calls.js";

/** A tool approval item's raw tool call (RunToolApprovalItem.rawItem of a function call). */
export interface ApprovalItem {
  rawItem: unknown;
}

/** The tools, and reject: cancel the parked call of a tool approval item the user rejected (state.reject). */
export type AgentsTools = FunctionTool[] & { reject: (item: ApprovalItem, reason?: string) => Promise<void> };

/** The caller's tools as Agents SDK function tools. */
export async function agentsTools(client: Client, options: CallsOptions = {}): Promise<AgentsTools> {
  const specs = await client.listTools(options.nameGlob ?? "", { session: options.session });
  const calls = new Calls(client, options);
  const tools = specs.map((spec) => {
    const schema = (spec.inputSchema ?? { type: "object", properties: {} }) as Record<string, unknown>;
    return tool({
      name: spec.name,
      description: spec.description || spec.summary || spec.title,
      parameters: { type: "object", properties: {}, required: [], additionalProperties: true, ...schema } as never,
      strict: false,
      needsApproval: async (_ctx: unknown, input: unknown, callId?: string) =>
        calls.approvals && callId !== undefined && (await calls.decide(spec.name, input as Args, callId)).kind === "ask",
      errorFunction: (_ctx: unknown, e: unknown) =>
        e instanceof ToolwireError ? e.message : "An error occurred while running the tool. Please try again.",
      execute: async (input: unknown, _ctx: unknown, details?: { toolCall?: { callId: string }; signal?: AbortSignal }) => {
        const out = await calls.run(spec.name, input as Args, details?.toolCall?.callId ?? "", details?.signal);
        return typeof out === "string" ? out : JSON.stringify(out);
      },
    }) as FunctionTool;
  });
  const reject = async (item: ApprovalItem, reason?: string): Promise<void> => {
    const raw = (item?.rawItem ?? {}) as { callId?: unknown; name?: unknown; arguments?: unknown };
    if (typeof raw.callId !== "string" || typeof raw.name !== "string") return;
    let input: unknown;
    try {
      input = typeof raw.arguments === "string" ? JSON.parse(raw.arguments) : raw.arguments;
    } catch {
      return; // not arguments decide() was given
    }
    await calls.reject(raw.name, input as Args, raw.callId, reason);
  };
  return Object.assign(tools, { reject });
}
