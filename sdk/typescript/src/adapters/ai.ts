// The fleet's tools as Vercel AI SDK tools (`ai` 7): the tools the caller
// may use (its scopes, the policy, the session's mode: ListTools) as tool()
// definitions whose execute runs the call through toolwire, and a
// toolApproval function that surfaces toolwire's approvals as the SDK's
// approval flow (calls.ts says how): a policy deny is the SDK's denial, an
// ask rule its approval request, and an approved ask runs the parked call.

import { jsonSchema, tool, type ToolSet } from "ai";
import type { Args, Client } from "../client.js";
import { Calls, type CallsOptions } from "./calls.js";

export type { CallsOptions as AiToolsOptions } from "./calls.js";

/** The AI SDK's approval answers (ToolApprovalStatus). */
export type ApprovalStatus =
  | { type: "not-applicable" }
  | { type: "user-approval"; reason?: string }
  | { type: "denied"; reason?: string };

export interface AiTools {
  tools: ToolSet;
  /** generateText's / streamText's / ToolLoopAgent's toolApproval. */
  toolApproval: (options: { toolCall: { toolCallId: string; toolName: string; input: unknown } }) => Promise<ApprovalStatus | undefined>;
}

/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export async function aiTools(client: Client, options: CallsOptions = {}): Promise<AiTools> {
  const specs = await client.listTools(options.nameGlob ?? "", { session: options.session });
  const calls = new Calls(client, options);
  const tools: ToolSet = {};
  for (const spec of specs) {
    tools[spec.name] = tool({
      description: spec.description || spec.summary || spec.title,
      inputSchema: jsonSchema((spec.inputSchema ?? { type: "object" }) as Parameters<typeof jsonSchema>[0]),
      execute: (input: unknown, { toolCallId, abortSignal }: { toolCallId: string; abortSignal?: AbortSignal }) =>
        calls.run(spec.name, input as Args, toolCallId, abortSignal),
    });
  }
  const toolApproval: AiTools["toolApproval"] = async ({ toolCall }) => {
    if (!Object.hasOwn(tools, toolCall.toolName)) return undefined;
    const d = await calls.decide(toolCall.toolName, toolCall.input as Args, toolCall.toolCallId);
    if (d.kind === "ask") return { type: "user-approval", reason: d.reason };
    if (d.kind === "deny") return { type: "denied", reason: d.reason };
    return { type: "not-applicable" };
  };
  return { tools, toolApproval };
}
