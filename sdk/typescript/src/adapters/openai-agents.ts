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

import { tool, type FunctionTool } from "@openai/agents";
import type { Args, Client } from "../client.js";
import { ToolwireError } from "../errors.js";
import { Calls, type CallsOptions } from "./calls.js";

export type { CallsOptions as AgentsToolsOptions } from "./calls.js";

/** The caller's tools as Agents SDK function tools. */
export async function agentsTools(client: Client, options: CallsOptions = {}): Promise<FunctionTool[]> {
  const specs = await client.listTools(options.nameGlob ?? "", { session: options.session });
  const calls = new Calls(client, options);
  return specs.map((spec) => {
    const schema = (spec.inputSchema ?? { type: "object", properties: {} }) as Record<string, unknown>;
    return tool({
      name: spec.name,
      description: spec.description || spec.summary || spec.title,
      parameters: { type: "object", properties: {}, required: [], additionalProperties: true, ...schema } as never,
      strict: false,
      needsApproval: async (_ctx: unknown, input: unknown, callId?: string) =>
        callId !== undefined && (await calls.decide(spec.name, input as Args, callId)).kind === "ask",
      errorFunction: (_ctx: unknown, e: unknown) =>
        e instanceof ToolwireError ? e.message : "An error occurred while running the tool. Please try again.",
      execute: async (input: unknown, _ctx: unknown, details?: { toolCall?: { callId: string }; signal?: AbortSignal }) => {
        const out = await calls.run(spec.name, input as Args, details?.toolCall?.callId ?? "", details?.signal);
        return typeof out === "string" ? out : JSON.stringify(out);
      },
    }) as FunctionTool;
  });
}
