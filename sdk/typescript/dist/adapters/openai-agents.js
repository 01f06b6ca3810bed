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
import { tool } from "@openai/agents";
import { ToolwireError } from "../errors.js";
import { Calls } from "./calls.js";
/** The caller's tools as Agents SDK function tools. */
export async function agentsTools(client, options = {}) {
    const specs = await client.listTools(options.nameGlob ?? "", { session: options.session });
    const calls = new Calls(client, options);
    const tools = specs.map((spec) => {
        const schema = (spec.inputSchema ?? { type: "object", properties: {} });
        return tool({
            name: spec.name,
            description: spec.description || spec.summary || spec.title,
            parameters: { type: "object", properties: {}, required: [], additionalProperties: true, ...schema },
            strict: false,
            needsApproval: async (_ctx, input, callId) => calls.approvals && callId !== undefined && (await calls.decide(spec.name, input, callId)).kind === "ask",
            errorFunction: (_ctx, e) => e instanceof ToolwireError ? e.message : "An error occurred while running the tool. Please try again.",
            execute: async (input, _ctx, details) => {
                const out = await calls.run(spec.name, input, details?.toolCall?.callId ?? "", details?.signal);
                return typeof out === "string" ? out : JSON.stringify(out);
            },
        });
    });
    const reject = async (item, reason) => {
        const raw = (item?.rawItem ?? {});
        if (typeof raw.callId !== "string" || typeof raw.name !== "string")
            return;
        let input;
        try {
            input = typeof raw.arguments === "string" ? JSON.parse(raw.arguments) : raw.arguments;
        }
        catch {
            return; // not arguments decide() was given
        }
        await calls.reject(raw.name, input, raw.callId, reason);
    };
    return Object.assign(tools, { reject });
}
