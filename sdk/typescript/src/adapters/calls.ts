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

import type { Client } from "../client.js";
import { ApprovalRequiredError, PermissionDeniedError } from "../errors.js";
import type { Args } from "../client.js";
import type { Result } from "../types.js";

export interface CallsOptions {
  /** The session every call belongs to (and whose mode filters the tools). */
  session?: string;
  /** Only the tools whose names match this glob. */
  nameGlob?: string;
  /** Seconds a tool call waits for its result (60). */
  wait?: number;
  /** Told each toolwire call's id as soon as it is known, with the framework's tool call id. */
  onCall?: (toolCallId: string, callId: string) => void;
}

export type Decision = { kind: "ask" | "deny"; reason: string } | { kind: "run" };

/** What decide learnt of a tool call: the parked call's approval, or the submitted call's id or result. */
type Pending = { approval: ApprovalRequiredError } | { callId: string; result?: Result };

/** At most this many tool calls decided and not yet run are remembered (a denied or rejected one never runs). */
const MAX_PENDING = 1000;

export class Calls {
  private readonly pending = new Map<string, Pending>();
  constructor(
    private readonly client: Client,
    private readonly options: CallsOptions,
  ) {}

  /** Decide a tool call ahead of the framework's approval step, by submitting it. */
  async decide(tool: string, args: Args, toolCallId: string): Promise<Decision> {
    const known = this.pending.get(toolCallId);
    if (known && "approval" in known) return { kind: "ask", reason: known.approval.reason }; // asked again on resuming
    const sub = await this.client.submit(tool, args, { session: this.options.session });
    if (sub.approval) {
      if (!sub.approval.token) {
        throw new Error(`toolwire: ${tool} asks for approval, but no token came with it (the API key needs the "confirm" scope, and the dispatchers token keys)`);
      }
      this.remember(toolCallId, { approval: sub.approval });
      return { kind: "ask", reason: sub.approval.reason };
    }
    this.options.onCall?.(toolCallId, sub.callId);
    this.remember(toolCallId, { callId: sub.callId, result: sub.result });
    if (sub.result?.error instanceof PermissionDeniedError) return { kind: "deny", reason: sub.result.error.rawMessage };
    return { kind: "run" };
  }

  /** Run a tool call: its structured content or text; a tool error is thrown. An abort cancels the call. */
  async run(tool: string, args: Args, toolCallId: string, signal?: AbortSignal): Promise<unknown> {
    const p = this.pending.get(toolCallId);
    this.pending.delete(toolCallId);
    const { session, wait = 60, onCall } = this.options;
    const onSubmitted = (id: string) => onCall?.(toolCallId, id);
    if (p && "approval" in p) {
      // The framework's user approved: redeem the parked call's token.
      return output(await this.client.call(tool, args, { session, approvalToken: p.approval.token, wait, signal, onSubmitted }));
    }
    if (p) return output(p.result ?? (await this.await(p.callId, wait, signal)));
    try {
      return output(await this.client.call(tool, args, { session, wait, signal, onSubmitted }));
    } catch (e) {
      if (e instanceof ApprovalRequiredError) return `this call waits for an approver (${e.reason}); approval id ${e.approvalId}`;
      throw e;
    }
  }

  private remember(id: string, p: Pending): void {
    if (this.pending.size >= MAX_PENDING) this.pending.delete(this.pending.keys().next().value as string);
    this.pending.set(id, p);
  }

  /** A submitted call's result, waited for up to `wait` seconds; an abort cancels the call. */
  private async await(callId: string, wait: number, signal?: AbortSignal): Promise<Result> {
    try {
      return await this.client.getResult(callId, { wait, signal });
    } catch (e) {
      if (signal?.aborted) await this.client.cancel(callId, "aborted by the caller").catch(() => undefined);
      throw e;
    }
  }
}

function output(r: Result): unknown {
  r.throwIfError();
  return r.structured ?? r.text;
}
