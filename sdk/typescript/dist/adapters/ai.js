// The fleet's tools as Vercel AI SDK tools (`ai` 7): the tools the caller
// may use (its scopes, the policy, the session's mode: ListTools) as tool()
// definitions whose execute runs the call through toolwire, and a
// toolApproval function that surfaces toolwire's approvals as the SDK's
// approval flow.
//
// How an ask rule meets the SDK's flow: toolApproval submits the call to
// toolwire (it is the policy, not the tool list, that decides whether a
// call asks). A call the policy parks answers "user-approval" (with the
// rule's reason); the SDK stops and returns a tool-approval-request. When
// the application's user approves (a tool-approval-response in the next
// generateText's messages), execute redeems the approval token the parked
// call came with, so the parked call runs, once: that is what the token is
// for (an orchestrator whose own user confirmed; the API key needs the
// "confirm" scope). A call the policy denies answers "denied" with the
// rule's reason; any other call is already queued and execute awaits its
// result. Without toolApproval, execute simply calls, and a parked call
// is reported to the model as waiting for an approver.
import { jsonSchema, tool } from "ai";
import { ApprovalRequiredError, PermissionDeniedError } from "../errors.js";
/**
 * The caller's tools as AI SDK tools, with the toolApproval function that
 * surfaces toolwire's approvals. A tool error is thrown from execute (the
 * SDK gives the model a tool-error with its message); a result is its
 * structured content when it has one, its text otherwise.
 */
export async function aiTools(client, options = {}) {
    const { session, wait = 60, onCall } = options;
    const specs = await client.listTools(options.nameGlob ?? "", { session });
    // Bounded by the tool calls of the steps in flight: an entry is taken by
    // execute; the oldest go beyond 1,000 (a denied call is never executed).
    const pending = new Map();
    const remember = (id, p) => {
        if (pending.size >= 1000)
            pending.delete(pending.keys().next().value);
        pending.set(id, p);
    };
    const output = (r) => {
        r.throwIfError();
        return r.structured ?? r.text;
    };
    const tools = {};
    for (const spec of specs) {
        tools[spec.name] = tool({
            description: spec.description || spec.summary || spec.title,
            inputSchema: jsonSchema((spec.inputSchema ?? { type: "object" })),
            execute: async (input, { toolCallId, abortSignal }) => {
                const p = pending.get(toolCallId);
                pending.delete(toolCallId);
                if (p && "approval" in p) {
                    // The SDK's user approved: redeem the parked call's token.
                    return output(await client.call(spec.name, input, {
                        session, approvalToken: p.approval.token, wait, signal: abortSignal, onSubmitted: (id) => onCall?.(toolCallId, id),
                    }));
                }
                if (p) {
                    if (p.result)
                        return output(p.result);
                    return output(await awaitResult(client, p.callId, wait, abortSignal));
                }
                try {
                    return output(await client.call(spec.name, input, {
                        session, wait, signal: abortSignal, onSubmitted: (id) => onCall?.(toolCallId, id),
                    }));
                }
                catch (e) {
                    if (e instanceof ApprovalRequiredError)
                        return `this call waits for an approver (${e.reason}); approval id ${e.approvalId}`;
                    throw e;
                }
            },
        });
    }
    const toolApproval = async ({ toolCall }) => {
        if (!Object.hasOwn(tools, toolCall.toolName))
            return undefined;
        const sub = await client.submit(toolCall.toolName, toolCall.input, { session });
        if (sub.approval) {
            if (!sub.approval.token)
                throw new Error(`toolwire: ${toolCall.toolName} asks for approval, but no token came with it (the API key needs the "confirm" scope, and the dispatchers token keys)`);
            remember(toolCall.toolCallId, { approval: sub.approval });
            return { type: "user-approval", reason: sub.approval.reason };
        }
        if (sub.result?.error instanceof PermissionDeniedError) {
            return { type: "denied", reason: sub.result.error.rawMessage };
        }
        onCall?.(toolCall.toolCallId, sub.callId);
        remember(toolCall.toolCallId, { callId: sub.callId, result: sub.result });
        return { type: "not-applicable" };
    };
    return { tools, toolApproval };
}
/** A submitted call's result, waited for up to `wait` seconds; an abort cancels the call. */
async function awaitResult(client, callId, wait, signal) {
    try {
        return await client.getResult(callId, { wait, signal });
    }
    catch (e) {
        if (signal?.aborted)
            await client.cancel(callId, "aborted by the caller").catch(() => undefined);
        throw e;
    }
}
