// The client: a Connect transport (connect-node, HTTP/1.1 keep-alive or
// one multiplexed HTTP/2 connection, binary protobuf by default) and an
// idiomatic layer over the generated DispatcherService client.

import * as http from "node:http";
import * as https from "node:https";
import { Code, ConnectError, createClient, type Client as RpcClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { durationFromMs, type Duration } from "@bufbuild/protobuf/wkt";
import {
  ApprovalRequiredError,
  PendingError,
  ToolwireError,
  TransportError,
  UnknownCallError,
  WatchEndedError,
} from "./errors.js";
import {
  CallState,
  CancelOutcome,
  DispatcherService,
  ToolFormat,
  type CallRequestSchema,
} from "./gen/toolwire/v1/dispatcher_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";

type CallInit = Exclude<MessageInitShape<typeof CallRequestSchema>, { $typeName: string }>;
import { ApprovalScope, ApprovalState } from "./gen/toolwire/v1/policy_pb.js";
import type { ToolResponse } from "./gen/toolwire/v1/response_pb.js";
import {
  approval,
  appliedIntent,
  CallEvent,
  grant,
  limitUsage,
  Result,
  session,
  toolError,
  toolSpec,
  type ApplyIntentsResult,
  type Approval,
  type ApproveResult,
  type Grant,
  type Session,
  type Submission,
  type ToolSpec,
  type Usage,
} from "./types.js";
import { codeNames, Unary } from "./unary.js";

/** Largest answer (or stream message) the client reads; a longer one is refused before it is read whole. */
export const MAX_MESSAGE_BYTES = 64 << 20;
/** Seconds a request is given beyond the wait the dispatcher is asked for, so that it answers PENDING first. */
export const HEADROOM = 10;
const USER_AGENT = "toolwire-typescript/0.1";

/** A call's arguments: an object (encoded with JSON.stringify) or JSON text (sent byte for byte: big integers survive). */
/** Seconds the Cancel sent after an abort may take: short, so that the abort is prompt (5, or the client's timeout when shorter). */
export function abortCancelTimeout(timeout: number): number {
  return Math.min(5, timeout);
}

export type Args = string | Uint8Array | Record<string, unknown> | unknown[] | undefined;

export interface ClientOptions {
  /** Authenticates every request as a bearer key; the dispatcher derives tenant, agent and scopes from it. */
  apiKey?: string;
  /** Seconds each request that does not wait on the server may take (30). */
  timeout?: number;
  /** Connect's JSON instead of binary protobuf on the wire. */
  json?: boolean;
  /** At most this many connections to the dispatcher (100); a request beyond waits for one. HTTP/1.1 only. */
  maxConns?: number;
  /**
   * The HTTP version: "1.1" (the default: keep-alive connections, up to
   * maxConns) or "2" (one connection multiplexing every request and watch:
   * with prior knowledge on http://, negotiated by TLS on https://). HTTP/2
   * costs the client less CPU a call, so more calls a second when the
   * client's CPU is what limits it (BENCHMARKS.md); the dispatcher serves
   * both on one port, but a proxy in between must speak HTTP/2 to it.
   */
  httpVersion?: "1.1" | "2";
  /**
   * The largest answer (or stream message) read, and request sent, in
   * bytes: a longer answer is refused (TransportError "resource_exhausted")
   * before it is read whole. At most, and by default, MAX_MESSAGE_BYTES.
   */
  maxMessageBytes?: number;
}

/** Options of every request. */
export interface RequestOptions {
  /** Seconds the request may take (the client's timeout; for call and getResult, their wait plus a headroom). */
  timeout?: number;
  /** Aborts the request; it then rejects with the signal's reason. For call, also cancels the call. */
  signal?: AbortSignal;
}

/** Options of call and submit (the CallRequest's fields; durations in seconds). */
export interface SubmitOptions extends RequestOptions {
  session?: string;
  user?: string;
  run?: string;
  turn?: string;
  idempotencyKey?: string;
  specVersion?: string;
  /** Redeem an approval token (ApprovalRequiredError.token). */
  approvalToken?: string;
  scheduleToStart?: number;
  scheduleToClose?: number;
  pinSessionVersions?: boolean;
  parentCallId?: string;
  /** The model the call is made for (docs/toolsets.md): held to what listTools offers that model. */
  model?: string;
}

/** Options of listTools and exportTools. */
export interface ListOptions extends RequestOptions {
  /** The session whose mode decides what is listed. */
  session?: string;
  /** The model the list is for: its family's toolset applies (docs/toolsets.md). */
  model?: string;
}

export interface CallOptions extends SubmitOptions {
  /** Seconds to wait for the terminal response (60); the call keeps running after. */
  wait?: number;
  /** Apply the call's intents to its session (Result.session, Result.applyError). */
  applyIntents?: boolean;
  /** Wait through an approval instead of throwing ApprovalRequiredError (not with a signal). */
  waitForApproval?: boolean;
  /** Told the call's id as soon as it is known (with a signal: after the submission). */
  onSubmitted?: (callId: string) => void;
}

export interface WatchOptions {
  /** Events an earlier watch yielded: skipped (resume after them). */
  after?: CallEvent[];
  /** Times in a row the stream is opened again when it breaks before the terminal event (3). */
  resume?: number;
  signal?: AbortSignal;
}

export interface ApproveOptions extends RequestOptions {
  /** "once" (the default), or a grant covering later calls: "session", "agent", "tenant". */
  scope?: "once" | "session" | "agent" | "tenant";
  reason?: string;
  argsPattern?: Record<string, string>;
  /** Seconds the grant lasts. */
  ttl?: number;
  tool?: string;
}

/** Watch failures that another try would meet again. */
const watchFatal = new Set(["unauthenticated", "permission_denied", "invalid_argument", "resource_exhausted"]);

function seconds2duration(s: number): Duration {
  if (!Number.isFinite(s)) throw new RangeError("toolwire: a duration must be a finite number of seconds");
  return durationFromMs(Math.max(s, 0) * 1000);
}

/** The API key, refused (the key not shown) when it has a character a header cannot carry. */
function checkApiKey(key: string | undefined): string | undefined {
  if (key !== undefined && !/^[!-~]+$/.test(key)) {
    throw new TypeError("toolwire: apiKey has a character an HTTP header cannot carry (control character, e.g. a trailing newline, space or non-ASCII); the key is not shown");
  }
  return key;
}

/** Arguments as exact JSON text. */
export function encodeArgs(args: Args): string | undefined {
  if (args === undefined) return undefined;
  if (typeof args === "string") return args;
  if (args instanceof Uint8Array) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(args);
    } catch {
      throw new TypeError("toolwire: arguments given as bytes must be UTF-8 JSON text");
    }
  }
  return JSON.stringify(args);
}

/** The wait the dispatcher is asked for, fitted inside the request's timeout so that it answers (PENDING) first. */
function fitWait(wait: number, timeout: number | undefined): number {
  if (timeout === undefined) return wait;
  return Math.min(wait, Math.max(timeout - Math.min(Math.max(timeout / 10, 0.1), 1), 0.001));
}

function stateName(s: CallState): string {
  return (CallState[s] ?? "PENDING").replace("UNSPECIFIED", "PENDING");
}

/** A (call id, state, response) answer as a Result, or the StateError / ApprovalRequiredError it is. */
function terminal(callId: string, state: CallState, resp: ToolResponse | undefined, unconfirmed = false): Result {
  if (state === CallState.DONE && resp) return new Result(callId, resp);
  if (state === CallState.AWAITING_APPROVAL && resp?.error) throw toolError(resp.error, callId, resp.tool);
  if (state === CallState.PENDING) throw new PendingError(callId, unconfirmed);
  throw new UnknownCallError(callId);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener("abort", abort);
      resolve();
    };
    const t = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/**
 * A client of a toolwire dispatcher's API. `baseUrl` is the dispatcher's
 * address, e.g. "http://127.0.0.1:8080" (a path prefix is kept, for a
 * dispatcher behind a reverse proxy). Safe for concurrent use: create one
 * per dispatcher and share it; close() closes every connection it holds.
 */
export class Client {
  /** The generated Connect client, for an RPC this layer does not cover. */
  readonly rpc: RpcClient<typeof DispatcherService>;
  readonly timeout: number;
  /** The client's own path for the unary RPCs (Connect's unary protocol without connect-es's per-call machinery). */
  private readonly wire: Unary;
  /** The HTTP/1.1 connections, or the HTTP/2 connection (httpVersion "2"). */
  private readonly agent?: http.Agent;
  private readonly session?: Http2SessionManager;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new TypeError(`toolwire: base URL ${JSON.stringify(baseUrl)}: want http://host[:port] or https://host[:port]`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`toolwire: base URL ${JSON.stringify(baseUrl)}: want http://host[:port] or https://host[:port]`);
    }
    const apiKey = checkApiKey(options.apiKey);
    this.timeout = options.timeout ?? 30;
    const version = options.httpVersion ?? "1.1";
    if (version !== "1.1" && version !== "2") {
      throw new TypeError(`toolwire: httpVersion ${JSON.stringify(version)}: want "1.1" or "2"`);
    }
    const maxBytes = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1 || maxBytes > MAX_MESSAGE_BYTES) {
      throw new RangeError(`toolwire: maxMessageBytes ${maxBytes}: want a whole number of bytes from 1 to ${MAX_MESSAGE_BYTES}`);
    }
    const headers: Interceptor = (next) => async (req) => {
      req.header.set("User-Agent", USER_AGENT);
      if (apiKey) req.header.set("Authorization", "Bearer " + apiKey);
      return next(req);
    };
    const common = {
      baseUrl: url.href.replace(/\/+$/, ""),
      useBinaryFormat: !options.json,
      interceptors: [headers],
      readMaxBytes: maxBytes,
      acceptCompression: [],
      writeMaxBytes: maxBytes,
    };
    let transport;
    if (version === "2") {
      // Idle, the connection neither keeps the process alive nor lives on
      // past 15 minutes (the session manager's defaults).
      this.session = new Http2SessionManager(url.origin);
      transport = createConnectTransport({ ...common, httpVersion: "2", sessionManager: this.session });
    } else {
      const agentOpts = { keepAlive: true, maxSockets: options.maxConns ?? 100, maxFreeSockets: 32, timeout: 60_000 };
      this.agent = url.protocol === "https:" ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
      transport = createConnectTransport({ ...common, httpVersion: "1.1", nodeOptions: { agent: this.agent } });
    }
    this.rpc = createClient(DispatcherService, transport);
    this.wire = new Unary({
      base: new URL(common.baseUrl), json: !!options.json, maxBytes, userAgent: USER_AGENT, apiKey,
      agent: this.agent, session: this.session,
    });
  }

  /**
   * Close every connection, idle or in use: requests and watches in flight
   * fail (with TransportError). Later requests open new connections.
   */
  close(): void {
    this.agent?.destroy();
    this.session?.abort();
  }

  /** An RPC, its failures as TransportError (or what notFound makes of a not_found), an abort as the signal's reason. */
  private async unary<T>(op: string, signal: AbortSignal | undefined, f: () => Promise<T>,
    notFound?: (e: TransportError) => Error): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw this.failure(op, e, signal, notFound);
    }
  }

  private failure(op: string, e: unknown, signal: AbortSignal | undefined, notFound?: (e: TransportError) => Error): unknown {
    if (signal?.aborted) return signal.reason;
    if (e instanceof ToolwireError) return e;
    const ce = ConnectError.from(e);
    const err = new TransportError(op, codeNames[ce.code] ?? "unknown", ce.rawMessage, ce.details);
    if (ce.code === Code.NotFound && notFound) return notFound(err);
    return err;
  }

  private opts(o: RequestOptions | undefined, timeout?: number) {
    return { signal: o?.signal, timeoutMs: Math.max(Math.round((o?.timeout ?? timeout ?? this.timeout) * 1000), 1) };
  }

  // --- calls ---------------------------------------------------------------

  private request(tool: string, args: Args, o: SubmitOptions): CallInit {
    const req: CallInit = { tool };
    const a = encodeArgs(args);
    if (a !== undefined) req.argumentsJson = a;
    for (const k of ["session", "user", "run", "turn", "idempotencyKey", "specVersion", "approvalToken", "parentCallId", "model"] as const) {
      if (o[k]) req[k] = o[k];
    }
    if (o.pinSessionVersions) req.pinSessionVersions = true;
    if (o.scheduleToStart !== undefined) req.scheduleToStart = seconds2duration(o.scheduleToStart);
    if (o.scheduleToClose !== undefined) req.scheduleToClose = seconds2duration(o.scheduleToClose);
    return req;
  }

  /**
   * Call `tool` with `args` and wait for its terminal response, at most
   * `wait` seconds (the call keeps running after). A tool error is an
   * answer: the Result's `error` holds it. Throws PendingError when the wait
   * ended first, ApprovalRequiredError when the call is parked for an
   * approver, TransportError when there is no answer.
   *
   * With a `signal`, the call is submitted and its result awaited, so that
   * an abort cancels the call on the fabric (reason "aborted by the
   * caller") besides ending the wait.
   */
  async call(tool: string, args?: Args, o: CallOptions = {}): Promise<Result> {
    if (o.signal) return this.callAbortable(tool, args, o, o.signal);
    const wait = fitWait(o.wait ?? 60, o.timeout);
    const req: CallInit = { ...this.request(tool, args, o), wait: seconds2duration(wait) };
    if (o.applyIntents) req.applyIntents = true;
    if (o.waitForApproval) req.waitForApproval = true;
    const resp = await this.unary("call " + tool, undefined, () => this.wire.call(DispatcherService.method.call, req, this.opts(o, wait + HEADROOM)));
    o.onSubmitted?.(resp.callId);
    const r = terminal(resp.callId, resp.state, resp.response, resp.unconfirmed);
    r.session = resp.session ? session(resp.session) : undefined;
    r.applyError = resp.applyError;
    return r;
  }

  private async callAbortable(tool: string, args: Args, o: CallOptions, signal: AbortSignal): Promise<Result> {
    signal.throwIfAborted();
    const sub = await this.submit(tool, args, { ...o, timeout: o.timeout });
    o.onSubmitted?.(sub.callId);
    if (sub.approval) throw sub.approval;
    let r = sub.result;
    if (!r) {
      const deadline = Date.now() + (o.wait ?? 60) * 1000;
      try {
        for (;;) {
          const left = (deadline - Date.now()) / 1000;
          try {
            r = await this.getResult(sub.callId, { wait: Math.max(left, 0), signal });
            break;
          } catch (e) {
            if (!(e instanceof PendingError) || left <= 0) throw e;
          }
        }
      } catch (e) {
        if (signal.aborted) {
          await this.cancel(sub.callId, "aborted by the caller", { timeout: abortCancelTimeout(this.timeout) }).catch(() => undefined);
        }
        throw e;
      }
    }
    if (o.applyIntents && r.ok && r.intents.length) {
      try {
        r.session = (await this.applyIntents(r.callId, { signal })).session;
      } catch (e) {
        if (signal.aborted) throw signal.reason;
        r.applyError = e instanceof Error ? e.message : String(e);
      }
    }
    return r;
  }

  /**
   * Submit a call without waiting. A call refused at admission is not an
   * error: Submission.result says why; a parked call has Submission.approval.
   */
  async submit(tool: string, args?: Args, o: SubmitOptions = {}): Promise<Submission> {
    const resp = await this.unary("submit " + tool, o.signal, () => this.wire.call(DispatcherService.method.submit, this.request(tool, args, o), this.opts(o)));
    const sub: Submission = {
      callId: resp.callId, duplicate: resp.duplicate, unconfirmed: resp.unconfirmed, result: undefined,
      approval: undefined, state: stateName(resp.state), raw: resp,
    };
    if (resp.state === CallState.AWAITING_APPROVAL && resp.response?.error) {
      const err = toolError(resp.response.error, resp.callId, resp.response.tool);
      if (err instanceof ApprovalRequiredError) sub.approval = err;
    } else if (resp.response) {
      sub.result = new Result(resp.callId, resp.response);
    }
    return sub;
  }

  /**
   * The terminal response of a call, waiting up to `wait` seconds for a
   * pending one (0). Throws PendingError, UnknownCallError,
   * ApprovalRequiredError or TransportError as call does.
   */
  async getResult(callId: string, o: RequestOptions & { wait?: number } = {}): Promise<Result> {
    const wait = fitWait(o.wait ?? 0, o.timeout);
    const req = wait > 0 ? { callId, wait: seconds2duration(wait) } : { callId };
    const resp = await this.unary("get result " + callId, o.signal, () => this.wire.call(DispatcherService.method.getResult, req, this.opts(o, wait + HEADROOM)), unknownCall(callId));
    return terminal(resp.callId || callId, resp.state, resp.response);
  }

  /**
   * Ask a call to stop: a queued call never runs, a running one has its
   * context cancelled and answers CANCELLED. Returns "REQUESTED",
   * "ALREADY_FINISHED" or "UNKNOWN_CALL"; twice, late or unknown is harmless.
   */
  async cancel(callId: string, reason = "", o: RequestOptions = {}): Promise<string> {
    const resp = await this.unary("cancel " + callId, o.signal, () => this.wire.call(DispatcherService.method.cancel, { callId, reason }, this.opts(o)));
    return CancelOutcome[resp.outcome] ?? "UNSPECIFIED";
  }

  /**
   * The call's lifecycle and progress events, from its admission on
   * (earlier events are replayed), up to its terminal event (FINISHED with
   * `event.result`, or REJECTED).
   *
   * Resumable: when the stream breaks before the terminal event it is
   * opened again, up to `resume` times in a row, and the events already
   * yielded are skipped; `after` (events an earlier watch yielded) skips
   * those too. Throws UnknownCallError for an id the dispatcher does not
   * know, WatchEndedError when resuming failed, TransportError for a
   * failure another try would meet again. Breaking out of the loop, or the
   * signal, closes the stream.
   */
  async *watch(callId: string, o: WatchOptions = {}): AsyncGenerator<CallEvent, void, undefined> {
    const op = "watch " + callId;
    const seen = new Resume(o.after);
    const resume = o.resume ?? 3;
    let failures = 0;
    for (;;) {
      let cause: unknown;
      try {
        for await (const m of this.rpc.watch({ callId }, { signal: o.signal })) {
          if (!m.event) continue;
          const ev = new CallEvent(m.event);
          if (!seen.fresh(ev)) continue;
          seen.mark(ev);
          failures = 0;
          yield ev;
          if (ev.terminal) return;
        }
      } catch (e) {
        const err = this.failure(op, e, o.signal, unknownCall(callId));
        if (!(err instanceof TransportError) || watchFatal.has(err.code)) throw err;
        cause = err;
      }
      failures++;
      if (failures > resume) throw new WatchEndedError(callId, cause);
      await sleep(Math.min(100 * 2 ** failures, 2000), o.signal);
    }
  }

  // --- tools ---------------------------------------------------------------

  /**
   * The tools the caller may use (its scopes, the policy, the session's mode), optionally those matching a name glob.
   * With `model`, the tools that model is offered (docs/toolsets.md): its family's toolset hides, substitutes and
   * narrows (a variant's input schema); pass the same model to `call`.
   */
  async listTools(nameGlob = "", o: ListOptions = {}): Promise<ToolSpec[]> {
    const resp = await this.unary("list tools", o.signal, () =>
      this.wire.call(DispatcherService.method.listTools, { format: ToolFormat.NATIVE, nameGlob, session: o.session ?? "", model: o.model ?? "" }, this.opts(o)));
    return resp.tools.map(toolSpec);
  }

  /** The caller's tools as a provider's tool list, decoded from JSON (with `model`, as listTools lists them). */
  async exportTools(format: "openai" | "anthropic" | "gemini" | "mcp", nameGlob = "",
    o: ListOptions = {}): Promise<unknown[]> {
    const f = ToolFormat[format.toUpperCase() as keyof typeof ToolFormat];
    if (f === undefined || f === ToolFormat.UNSPECIFIED || f === ToolFormat.NATIVE) {
      throw new TypeError(`toolwire: unknown tool format ${JSON.stringify(format)} (openai, anthropic, gemini, mcp)`);
    }
    const resp = await this.unary("export tools", o.signal, () =>
      this.wire.call(DispatcherService.method.listTools, { format: f, nameGlob, session: o.session ?? "", model: o.model ?? "" }, this.opts(o)));
    const v = JSON.parse(resp.toolsJson || "[]");
    return Array.isArray(v) ? v : [];
  }

  /**
   * One tool's spec (its current version, or `version`). With `model`, as listTools with that model lists it: a tool
   * the model's toolset hides or substitutes rejects with TransportError "not_found", a variant has its input schema.
   */
  async getTool(name: string, version = "", o: RequestOptions & { model?: string } = {}): Promise<ToolSpec> {
    const resp = await this.unary("get tool " + name, o.signal, () =>
      this.wire.call(DispatcherService.method.getTool, { name, version, model: o.model ?? "" }, this.opts(o)));
    if (!resp.tool) throw new TransportError("get tool " + name, "internal", "the answer has no tool");
    return toolSpec(resp.tool);
  }

  // --- sessions --------------------------------------------------------------

  /** The state the reference applier keeps for a session. */
  async getSession(name: string, o: RequestOptions = {}): Promise<Session> {
    const resp = await this.unary("get session " + name, o.signal, () => this.wire.call(DispatcherService.method.getSession, { session: name }, this.opts(o)));
    return sessionOf("get session " + name, resp.session);
  }

  /** Apply the intents of a finished call to its session, each exactly once (repeating applies nothing new). */
  async applyIntents(callId: string, o: RequestOptions = {}): Promise<ApplyIntentsResult> {
    const op = "apply intents of " + callId;
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.applyIntents, { callId }, this.opts(o)));
    return { session: sessionOf(op, resp.session), applied: resp.applied, skipped: resp.skipped, refused: resp.refused.map(appliedIntent) };
  }

  /** Set a session's mode (admin scope). */
  async setSessionMode(name: string, mode: string, o: RequestOptions = {}): Promise<Session> {
    const op = "set session mode " + name;
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.setSessionMode, { session: name, mode }, this.opts(o)));
    return sessionOf(op, resp.session);
  }

  /** End a session: its later calls are refused SESSION_INACTIVE (admin scope). */
  async endSession(name: string, reason = "", o: RequestOptions = {}): Promise<Session> {
    const op = "end session " + name;
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.endSession, { session: name, reason }, this.opts(o)));
    return sessionOf(op, resp.session);
  }

  // --- approvals -------------------------------------------------------------

  /** Approvals of the caller's tenant, newest first (approve scope). */
  async listApprovals(state?: "pending" | "approved" | "denied" | "expired",
    o: RequestOptions & { tool?: string; session?: string; agent?: string; limit?: number } = {}): Promise<Approval[]> {
    const s = state ? ApprovalState[state.toUpperCase() as keyof typeof ApprovalState] : ApprovalState.UNSPECIFIED;
    if (s === undefined) throw new TypeError(`toolwire: unknown approval state ${JSON.stringify(state)}`);
    const resp = await this.unary("list approvals", o.signal, () => this.wire.call(DispatcherService.method.listApprovals,
      { state: s, tool: o.tool ?? "", session: o.session ?? "", agent: o.agent ?? "", limit: o.limit ?? 0 }, this.opts(o)));
    return resp.approvals.map(approval);
  }

  /** One approval (approve scope). */
  async getApproval(id: string, o: RequestOptions = {}): Promise<Approval> {
    const op = "get approval " + id;
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.getApproval, { id }, this.opts(o)));
    if (!resp.approval) throw new TransportError(op, "internal", "the answer has no approval");
    return approval(resp.approval);
  }

  /** Approve a parked call, once or (scope "session", "agent", "tenant") as a grant covering later calls (approve scope). */
  async approve(id: string, o: ApproveOptions = {}): Promise<ApproveResult> {
    const op = "approve " + id;
    const scope = ApprovalScope[(o.scope ?? "once").toUpperCase() as keyof typeof ApprovalScope];
    if (scope === undefined) throw new TypeError(`toolwire: unknown approval scope ${JSON.stringify(o.scope)}`);
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.approve, {
      id, scope, reason: o.reason ?? "", argsPattern: o.argsPattern ?? {}, tool: o.tool ?? "",
      ttl: o.ttl !== undefined ? seconds2duration(o.ttl) : undefined,
    }, this.opts(o)));
    if (!resp.approval) throw new TransportError(op, "internal", "the answer has no approval");
    return { approval: approval(resp.approval), grant: resp.grant ? grant(resp.grant) : undefined };
  }

  /** Deny a parked call; its caller gets PERMISSION_DENIED with the reason. */
  async deny(id: string, reason: string, o: RequestOptions = {}): Promise<Approval> {
    const op = "deny " + id;
    const resp = await this.unary(op, o.signal, () => this.wire.call(DispatcherService.method.deny, { id, reason }, this.opts(o)));
    if (!resp.approval) throw new TransportError(op, "internal", "the answer has no approval");
    return approval(resp.approval);
  }

  /** The standing grants of the caller's tenant (approve scope). */
  async listGrants(o: RequestOptions & { agent?: string; session?: string } = {}): Promise<Grant[]> {
    const resp = await this.unary("list grants", o.signal, () => this.wire.call(DispatcherService.method.listGrants, { agent: o.agent ?? "", session: o.session ?? "" }, this.opts(o)));
    return resp.grants.map(grant);
  }

  /** Remove a grant; true when it existed. */
  async revokeGrant(id: string, o: RequestOptions = {}): Promise<boolean> {
    const resp = await this.unary("revoke grant " + id, o.signal, () => this.wire.call(DispatcherService.method.revokeGrant, { id }, this.opts(o)));
    return resp.revoked;
  }

  // --- usage -----------------------------------------------------------------

  /** Each limit of the policy in force as it stands for the caller's agent (or, with the admin scope, another agent, session, user or run). */
  async usage(o: RequestOptions & { agent?: string; session?: string; user?: string; run?: string } = {}): Promise<Usage> {
    const resp = await this.unary("usage", o.signal, () => this.wire.call(DispatcherService.method.getUsage,
      { agent: o.agent ?? "", session: o.session ?? "", user: o.user ?? "", run: o.run ?? "" }, this.opts(o)));
    return { limits: resp.limits.map(limitUsage), policyVersion: resp.policyVersion };
  }
}

function unknownCall(callId: string): (e: TransportError) => Error {
  return (e) => (e.rawMessage.includes("unknown call") ? new UnknownCallError(callId) : e);
}

function sessionOf(op: string, s: Parameters<typeof session>[0] | undefined): Session {
  if (!s) throw new TransportError(op, "internal", "the answer has no session");
  return session(s);
}

/**
 * The state of a resumable watch: the keys of the events already yielded,
 * so that a reconnected stream (which replays the call's events from its
 * admission) yields only new ones; at most `cap` keys are kept.
 */
class Resume {
  private readonly seen = new Set<string>();
  constructor(after: CallEvent[] = [], private readonly cap = 100_000) {
    for (const e of after) this.mark(e);
  }
  fresh(ev: CallEvent): boolean {
    return ev.type !== "UNSPECIFIED" && !this.seen.has(ev.key());
  }
  mark(ev: CallEvent): void {
    if (this.seen.size >= this.cap) this.seen.delete(this.seen.values().next().value as string);
    this.seen.add(ev.key());
  }
}
