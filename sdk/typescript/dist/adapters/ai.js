// The fleet's tools as Vercel AI SDK tools (`ai` 7): the tools the caller
// may use (its scopes, the policy, the session's mode: ListTools) as tool()
// definitions whose execute runs the call through toolwire, and a
// toolApproval function that surfaces toolwire's approvals as the SDK's
// approval flow (calls.ts says how): a policy deny is the SDK's denial, an
// ask rule its approval request, and an approved ask runs the parked call.
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
    const toolApproval = async ({ toolCall }) => {
        if (!Object.hasOwn(tools, toolCall.toolName))
            return undefined;
        const d = await calls.decide(toolCall.toolName, toolCall.input, toolCall.toolCallId);
        if (d.kind === "ask")
            return { type: "user-approval", reason: d.reason };
        if (d.kind === "deny")
            return { type: "denied", reason: d.reason };
        return { type: "not-applicable" };
    };
    return { tools, toolApproval };
}
