// The fleet's tools as Vercel AI SDK tools (`ai` 7): the tools the caller
// may use (its scopes, the policy, the session's mode: ListTools) as tool()
// definitions whose execute runs the call through toolwire, and a
// toolApproval function that surfaces toolwire's approvals as the SDK's
// approval flow (calls.ts says how): a policy deny is the SDK's denial, an
// ask rule its approval request, and an approved ask runs the parked call.
// A call the policy allows starts when toolApproval submits it, before the
// SDK's finish-reason check (calls.ts; `approvals: false` turns that off).
// A user's rejection (a tool-approval-response with approved: false)
// cancels the parked call: toolApproval looks for them in the messages it
// is given, and reject(messages) does so before the SDK is called again.

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
  toolApproval: (options: { toolCall: { toolCallId: string; toolName: string; input: unknown }; messages?: unknown[] }) => Promise<ApprovalStatus | undefined>;
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
  const reject: AiTools["reject"] = async (messages) => {
    for (const c of rejected(messages)) {
      if (Object.hasOwn(tools, c.toolName)) await calls.reject(c.toolName, c.input as Args, c.toolCallId);
    }
  };
  const toolApproval: AiTools["toolApproval"] = async ({ toolCall, messages }) => {
    if (messages) await reject(messages);
    if (!calls.approvals || !Object.hasOwn(tools, toolCall.toolName)) return undefined;
    const d = await calls.decide(toolCall.toolName, toolCall.input as Args, toolCall.toolCallId);
    if (d.kind === "ask") return { type: "user-approval", reason: d.reason };
    if (d.kind === "deny") return { type: "denied", reason: d.reason };
    return { type: "not-applicable" };
  };
  return { tools, toolApproval, reject };
}

type Part = { type?: string; approvalId?: string; toolCallId?: string; toolName?: string; input?: unknown; approved?: boolean };
type Message = { role?: string; content?: unknown };

/** The tool calls whose approval the last message of messages rejects (the SDK's ModelMessage shapes). */
function rejected(messages: unknown[]): { toolCallId: string; toolName: string; input: unknown }[] {
  const parts = (m: unknown): Part[] => {
    const c = (m as Message | null)?.content;
    return Array.isArray(c) ? (c as Part[]) : [];
  };
  const last = messages.at(-1) as Message | undefined;
  if (last?.role !== "tool") return [];
  const denied = new Set(parts(last).filter((p) => p.type === "tool-approval-response" && p.approved === false).map((p) => p.approvalId));
  if (denied.size === 0) return [];
  const calls = new Map<string, Part>();
  const requests: Part[] = [];
  for (const m of messages) {
    if ((m as Message | null)?.role !== "assistant") continue;
    for (const p of parts(m)) {
      if (p.type === "tool-call" && p.toolCallId) calls.set(p.toolCallId, p);
      if (p.type === "tool-approval-request" && denied.has(p.approvalId)) requests.push(p);
    }
  }
  const out = [];
  for (const r of requests) {
    const c = r.toolCallId ? calls.get(r.toolCallId) : undefined;
    if (c?.toolCallId && c.toolName) out.push({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input });
  }
  return out;
}
