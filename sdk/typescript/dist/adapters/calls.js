// What the agent-framework adapters share: deciding a tool call ahead of
// the framework's approval step (by submitting it: toolwire's policy, not
// the tool list, decides whether a call asks), and running it afterwards.
//
// decide() submits the call. A call the policy parks is "ask" (with the
// rule's reason): the framework asks its own user; when it runs the call
// after all, run() redeems the approval token the parked call came with,
// so the parked call runs, once: what the token is for (an orchestrator
// whose own user confirmed; the API key needs the "confirm" scope). A call
// the policy denies is "deny" with the rule's reason; any other is "run",
// and run() awaits the submitted call's result. run() without a decide()
// before it simply calls; a parked call is then reported to the model as
// waiting for an approver.
//
// A call the policy allows therefore starts when decide() submits it: at
// the framework's approval step, before the framework's own later gates
// (the Agents SDK's tool input guardrails, the AI SDK's finish-reason
// check). There is no side-effect-free "would this ask?" for a caller
// without the admin scope (Explain needs it), so that is the contract, and
// the README says so; `approvals: false` turns decide() off (execute then
// submits, and a parked call is reported to the model as waiting).
//
// Every submission of a tool call carries one idempotency key, derived
// from the session, the framework's tool call id, the tool and its
// arguments (keyOf): deciding the same tool call again — on resuming, in
// another process, with new adapter objects — answers the call submitted
// first (a Duplicate) instead of parking or running a second one. The
// dispatcher gives an approval token only with a call's first answer, so a
// parked call decided again elsewhere has none: run() then reports it as
// waiting for a toolwire approver rather than parking another. The pending
// state is keyed the same way, so a reused tool call id with other
// arguments is another call. reject() cancels a parked call the
// framework's user rejected (a cancelled parked call is denied and never
// runs).
import { createHash } from "node:crypto";
import { abortCancelTimeout } from "../client.js";
import { ApprovalRequiredError, PermissionDeniedError } from "../errors.js";
/** At most this many tool calls decided and not yet run are remembered (a denied or rejected one never runs). */
const MAX_PENDING = 1000;
export class Calls {
    client;
    options;
    pending = new Map();
    constructor(client, options) {
        this.client = client;
        this.options = options;
    }
    /** Whether decide() is used (the approvals option). */
    get approvals() {
        return this.options.approvals !== false;
    }
    /** Decide a tool call ahead of the framework's approval step, by submitting it (once: its idempotency key). */
    async decide(tool, args, toolCallId) {
        const key = keyOf(this.options.session, toolCallId, tool, args);
        const known = this.pending.get(key);
        if (known)
            return "approval" in known ? { kind: "ask", reason: known.approval.reason } : { kind: "run" }; // asked again on resuming
        const sub = await this.client.submit(tool, args, { session: this.options.session, idempotencyKey: key });
        this.options.onCall?.(toolCallId, sub.callId);
        if (sub.approval) {
            if (!sub.approval.token && !sub.duplicate) {
                throw new Error(`toolwire: ${tool} asks for approval, but no token came with it (the API key needs the "confirm" scope, and the dispatchers token keys)`);
            }
            this.remember(key, { callId: sub.callId, approval: sub.approval });
            return { kind: "ask", reason: sub.approval.reason };
        }
        this.remember(key, { callId: sub.callId, result: sub.result });
        if (sub.result?.error instanceof PermissionDeniedError)
            return { kind: "deny", reason: sub.result.error.rawMessage };
        return { kind: "run" };
    }
    /** Run a tool call: its structured content or text; a tool error is thrown. An abort cancels the call. */
    async run(tool, args, toolCallId, signal) {
        const key = keyOf(this.options.session, toolCallId, tool, args);
        const p = this.pending.get(key);
        this.pending.delete(key);
        const { session, wait = 60, onCall } = this.options;
        const onSubmitted = (id) => onCall?.(toolCallId, id);
        if (p && "approval" in p) {
            // The framework's user approved: redeem the parked call's token.
            if (!p.approval.token)
                return waiting(p.approval);
            return output(await this.client.call(tool, args, { session, approvalToken: p.approval.token, wait, signal, onSubmitted }));
        }
        if (p)
            return output(p.result ?? (await this.await(p.callId, wait, signal)));
        try {
            return output(await this.client.call(tool, args, { session, idempotencyKey: key, wait, signal, onSubmitted }));
        }
        catch (e) {
            if (e instanceof ApprovalRequiredError)
                return waiting(e);
            throw e;
        }
    }
    /**
     * The framework's user rejected a tool call: cancel the call decide()
     * parked for it, so that no toolwire approver can run it afterwards.
     * A tool call this object did not decide is left alone (onCall told its id).
     */
    async reject(tool, args, toolCallId, reason = "rejected by the user") {
        const key = keyOf(this.options.session, toolCallId, tool, args);
        const p = this.pending.get(key);
        if (!p || !("approval" in p))
            return;
        this.pending.delete(key);
        await this.client.cancel(p.callId, reason);
    }
    remember(key, p) {
        if (this.pending.size >= MAX_PENDING)
            this.pending.delete(this.pending.keys().next().value);
        this.pending.set(key, p);
    }
    /** A submitted call's result, waited for up to `wait` seconds; an abort cancels the call. */
    async await(callId, wait, signal) {
        try {
            return await this.client.getResult(callId, { wait, signal });
        }
        catch (e) {
            if (signal?.aborted) {
                await this.client.cancel(callId, "aborted by the caller", { timeout: abortCancelTimeout(this.client.timeout) }).catch(() => undefined);
            }
            throw e;
        }
    }
}
/**
 * The idempotency key of a tool call (and its pending state's key): the
 * SHA-256 of the session, the framework's tool call id, the tool and the
 * arguments (objects with their keys sorted).
 */
export function keyOf(session, toolCallId, tool, args) {
    const h = createHash("sha256");
    for (const part of [session ?? "", toolCallId, tool])
        h.update(part).update("\0");
    if (args instanceof Uint8Array)
        h.update("b\0").update(args);
    else if (typeof args === "string")
        h.update("s\0").update(args);
    else
        h.update("j\0").update(canonical(args));
    return "tw-sdk-" + h.digest("hex");
}
/** JSON with object keys sorted, at every depth. */
function canonical(v) {
    if (Array.isArray(v))
        return "[" + v.map(canonical).join(",") + "]";
    if (v !== null && typeof v === "object") {
        const o = v;
        const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
        return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(o[k])).join(",") + "}";
    }
    return JSON.stringify(v) ?? "null";
}
function waiting(e) {
    return `this call waits for an approver (${e.reason}); approval id ${e.approvalId}`;
}
function output(r) {
    r.throwIfError();
    return r.structured ?? r.text;
}
