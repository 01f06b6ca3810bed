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
import { jsonSchema, tool } from "ai";
import { Calls } from "./calls.js";
/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export async function aiTools(client, options = {}) {
    const specs = await client.listTools(options.nameGlob ?? "", { session: options.session });
    const calls = new Calls(client, options);
    const tools = {};
    for (const spec of specs) {
        tools[spec.name] = tool({
            description: spec.description || spec.summary || spec.title,
            inputSchema: jsonSchema((spec.inputSchema ?? { type: "object" })),
            execute: (input, { toolCallId, abortSignal }) => calls.run(spec.name, input, toolCallId, abortSignal),
        });
    }
    const reject = async (messages) => {
        for (const c of rejected(messages)) {
            if (Object.hasOwn(tools, c.toolName))
                await calls.reject(c.toolName, c.input, c.toolCallId);
        }
    };
    const toolApproval = async ({ toolCall, messages }) => {
        if (messages)
            await reject(messages);
        if (!calls.approvals || !Object.hasOwn(tools, toolCall.toolName))
            return undefined;
        const d = await calls.decide(toolCall.toolName, toolCall.input, toolCall.toolCallId);
        if (d.kind === "ask")
            return { type: "user-approval", reason: d.reason };
        if (d.kind === "deny")
            return { type: "denied", reason: d.reason };
        return { type: "not-applicable" };
    };
    return { tools, toolApproval, reject };
}
/** The tool calls whose approval the last message of messages rejects (the SDK's ModelMessage shapes). */
function rejected(messages) {
    const parts = (m) => {
        const c = m?.content;
        return Array.isArray(c) ? c : [];
    };
    const last = messages.at(-1);
    if (last?.role !== "tool")
        return [];
    const denied = new Set(parts(last).filter((p) => p.type === "tool-approval-response" && p.approved === false).map((p) => p.approvalId));
    if (denied.size === 0)
        return [];
    const calls = new Map();
    const requests = [];
    for (const m of messages) {
        if (m?.role !== "assistant")
            continue;
        for (const p of parts(m)) {
            if (p.type === "tool-call" && p.toolCallId)
                calls.set(p.toolCallId, p);
            if (p.type === "tool-approval-request" && denied.has(p.approvalId))
                requests.push(p);
        }
    }
    const out = [];
    for (const r of requests) {
        const c = r.toolCallId ? calls.get(r.toolCallId) : undefined;
        if (c?.toolCallId && c.toolName)
            out.push({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input });
    }
    return out;
}
