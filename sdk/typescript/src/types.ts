// Typed views of the API's messages. Each keeps the generated message it
// was made from in `raw`, so a field this version does not model is still
// there. Enum values are given by their short names ("DONE", "PROGRESS",
// "RATE_LIMIT"), durations as seconds (numbers, as HTTP's Retry-After and
// the Python client), timestamps as Dates, and JSON text fields also
// decoded (structured, payload, inputSchema, arguments).

import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  ApprovalRequiredError,
  ToolError,
  toolErrorClass,
  type ToolErrorInit,
} from "./errors.js";
import type * as pb from "./gen/toolwire/v1/dispatcher_pb.js";
import { CallEventType, type CallEvent as PbCallEvent } from "./gen/toolwire/v1/event_pb.js";
import { ErrorType, PartialSideEffects, type ToolError as PbToolError } from "./gen/toolwire/v1/error_pb.js";
import type { Content as PbContent } from "./gen/toolwire/v1/content_pb.js";
import type { ToolResponse } from "./gen/toolwire/v1/response_pb.js";
import { ApprovalScope, ApprovalState, type Approval as PbApproval, type Grant as PbGrant } from "./gen/toolwire/v1/policy_pb.js";
import { ExecutorType, ToolCategory, type ToolSpec as PbToolSpec } from "./gen/toolwire/v1/spec_pb.js";

/** A protobuf Duration as seconds; undefined when unset. */
export function seconds(d: Duration | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) + d.nanos / 1e9;
}

/** A protobuf Timestamp as a Date; undefined when unset. */
export function date(t: Timestamp | undefined): Date | undefined {
  return t ? timestampDate(t) : undefined;
}

/** JSON text decoded; undefined when empty or not JSON. */
export function jsonText(s: string): unknown {
  if (!s) return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function enumName(e: Record<number, string>, v: number): string {
  return e[v] ?? "UNSPECIFIED";
}

/** The typed ToolError of an envelope's error object. */
export function toolError(e: PbToolError, callId = "", tool = ""): ToolError {
  const type = enumName(ErrorType, e.type);
  const init: ToolErrorInit = {
    type,
    message: e.message,
    retryable: e.retryable,
    sideEffects: enumName(PartialSideEffects, e.partialSideEffects),
    suggestion: e.suggestion,
    retryAfter: seconds(e.retryAfter),
    violations: e.violations.map((v) => ({ field: v.field, message: v.message })),
    callId,
    tool,
  };
  if (e.type === ErrorType.CONFIRMATION_REQUIRED && e.approval) {
    return new ApprovalRequiredError(init, e.approval.approvalId, e.approval.token, date(e.approval.expiresAt));
  }
  return new (toolErrorClass(type))(init);
}

/** One content block: kind is "text", "image", "audio", "resource_link" or "resource" (MCP's kinds). */
export interface Content {
  kind: "text" | "image" | "audio" | "resource_link" | "resource" | "unknown";
  text: string;
  data: Uint8Array;
  mimeType: string;
  uri: string;
  name: string;
  raw: PbContent;
}

export function content(c: PbContent): Content {
  const out: Content = { kind: "unknown", text: "", data: new Uint8Array(), mimeType: "", uri: "", name: "", raw: c };
  switch (c.kind.case) {
    case "text":
      return { ...out, kind: "text", text: c.kind.value.text };
    case "image":
    case "audio":
      return { ...out, kind: c.kind.case, data: c.kind.value.data, mimeType: c.kind.value.mimeType };
    case "resourceLink":
      return { ...out, kind: "resource_link", uri: c.kind.value.uri, name: c.kind.value.name, mimeType: c.kind.value.mimeType };
    case "resource": {
      const r = c.kind.value;
      const body = r.contents.case === "text" ? { text: r.contents.value } : r.contents.case === "blob" ? { data: r.contents.value } : {};
      return { ...out, kind: "resource", uri: r.uri, mimeType: r.mimeType, ...body };
    }
  }
  return out;
}

/** A state change the tool asks the orchestrator to make. */
export interface Intent {
  id: string;
  type: string;
  payloadJson: string;
  payload: unknown;
}

/** How a response was produced. */
export interface ResponseMeta {
  worker: string;
  attempt: number;
  /** "worker", "dispatcher", ... */
  source: string;
  specVersion: string;
  session: string;
  /** Seconds the attempt ran. */
  duration: number | undefined;
  truncated: boolean;
  cancelledBy: string;
  cancelReason: string;
  loopCount: number;
}

/**
 * A call's terminal response (the envelope), which may be a tool error:
 * `ok` is false when `error` holds the typed ToolError; throwIfError()
 * throws it. `text` joins the text blocks.
 */
export class Result {
  readonly callId: string;
  readonly ok: boolean;
  readonly tool: string;
  readonly content: Content[];
  readonly structuredJson: string;
  readonly structured: unknown;
  readonly error: ToolError | undefined;
  readonly intents: Intent[];
  readonly meta: ResponseMeta;
  /** The session after applying the intents (applyIntents: true). */
  session: Session | undefined;
  /** Why the intents could not be applied (applyIntents: true). */
  applyError = "";

  constructor(
    callId: string,
    readonly raw: ToolResponse | undefined,
    rejection?: ToolError,
  ) {
    const r = raw;
    this.callId = r?.callId || callId;
    this.tool = r?.tool ?? rejection?.tool ?? "";
    this.ok = r ? r.ok : false;
    this.content = (r?.content ?? []).map(content);
    this.structuredJson = r?.structuredJson ?? "";
    this.structured = jsonText(this.structuredJson);
    this.intents = (r?.intents ?? []).map((i) => ({ id: i.id, type: i.type, payloadJson: i.payloadJson, payload: jsonText(i.payloadJson) ?? {} }));
    const m = r?.meta;
    this.meta = {
      worker: m?.worker ?? "",
      attempt: m?.attempt ?? 0,
      source: m?.source ?? (rejection ? "dispatcher" : ""),
      specVersion: m?.specVersion ?? "",
      session: m?.session ?? "",
      duration: seconds(m?.duration),
      truncated: m?.truncated ?? false,
      cancelledBy: m?.cancelledBy ?? "",
      cancelReason: m?.cancelReason ?? "",
      loopCount: m?.loopCount ?? 0,
    };
    if (rejection) this.error = rejection;
    else if (!this.ok) {
      this.error = r?.error
        ? toolError(r.error, this.callId, this.tool)
        : new (toolErrorClass("INTERNAL"))({ message: "the response is not ok but carries no error", sideEffects: "UNKNOWN", callId: this.callId, tool: this.tool });
    }
  }

  /** The text blocks joined by newlines (the structured JSON when there is none; the error's message for a failed call). */
  get text(): string {
    const texts = this.content.filter((c) => c.kind === "text").map((c) => c.text);
    if (texts.length) return texts.join("\n");
    if (this.error) return this.error.message;
    return this.structuredJson;
  }

  /** Throw the call's ToolError, if it failed; return this otherwise. */
  throwIfError(): this {
    if (this.error) throw this.error;
    return this;
  }
}

/** What submit answered. */
export interface Submission {
  callId: string;
  /** The idempotency key matched an earlier call; nothing new was queued. */
  duplicate: boolean;
  /** The calls stream had not yet acknowledged the call (it may run). */
  unconfirmed: boolean;
  /** The terminal response, when refused at admission or a duplicate of a finished call. */
  result: Result | undefined;
  /** Set when the call is parked for an approver. */
  approval: ApprovalRequiredError | undefined;
  /** "PENDING", "DONE", "AWAITING_APPROVAL". */
  state: string;
  raw: pb.SubmitResponse;
}

const terminalTypes = new Set(["FINISHED", "REJECTED"]);

/**
 * A lifecycle or progress event of a call (what watch yields). `type` is
 * "ACCEPTED", "STARTED", "PROGRESS", "RETRYING", "CANCEL_REQUESTED",
 * "FINISHED", "REJECTED", "AWAITING_APPROVAL", "APPROVED",
 * "APPROVAL_DENIED", "APPROVAL_EXPIRED" or "LATENCY_BUDGET_EXCEEDED".
 */
export class CallEvent {
  readonly callId: string;
  readonly type: string;
  readonly time: Date | undefined;
  readonly attempt: number;
  readonly worker: string;
  readonly message: string;
  readonly percent: number | undefined;
  readonly partial: Content[];
  readonly error: ToolError | undefined;
  readonly retryDelay: number | undefined;
  readonly tool: string;
  /** The terminal response, on FINISHED (the rejection, on REJECTED). */
  readonly result: Result | undefined;

  constructor(readonly raw: PbCallEvent) {
    const e = raw;
    this.callId = e.callId;
    this.type = enumName(CallEventType, e.type);
    this.time = date(e.time);
    this.attempt = e.attempt;
    this.worker = e.worker;
    this.message = e.message;
    this.percent = e.percent;
    this.partial = e.partial.map(content);
    this.tool = e.tool;
    this.error = e.error ? toolError(e.error, e.callId, e.tool) : undefined;
    this.retryDelay = seconds(e.retryDelay);
    if (this.type === "FINISHED" && e.response) this.result = new Result(e.callId, e.response);
    else if (this.type === "REJECTED" && this.error) this.result = new Result(e.callId, undefined, this.error);
  }

  /** FINISHED or REJECTED: the last event of a call. */
  get terminal(): boolean {
    return terminalTypes.has(this.type);
  }

  /**
   * Identifies the event among its call's events (watch resumes by it). A
   * call has one terminal event, which the dispatcher may build anew (with
   * a new time) for each watch: its key is its type.
   */
  key(): string {
    if (this.terminal) return this.type;
    const t = this.raw.time;
    return [this.type, t ? `${t.seconds}.${t.nanos}` : "", this.attempt, this.worker, this.message, this.percent ?? "", this.raw.partialSeq].join("|");
  }
}

/** An intent the reference applier applied, or refused (refused says why). */
export interface AppliedIntent {
  callId: string;
  intentId: string;
  type: string;
  payloadJson: string;
  refused: string;
  appliedAt: Date | undefined;
}

export function appliedIntent(a: pb.AppliedIntent): AppliedIntent {
  return { callId: a.callId, intentId: a.intentId, type: a.type, payloadJson: a.payloadJson, refused: a.refused, appliedAt: date(a.appliedAt) };
}

/** The state the dispatcher's reference applier keeps for a session. */
export interface Session {
  session: string;
  tenant: string;
  /** SET_STATE values by key, decoded from JSON. */
  state: Record<string, unknown>;
  ended: boolean;
  endReason: string;
  suppressAudio: boolean;
  suppressTranscript: boolean;
  pendingMessage: string;
  mode: string;
  revision: bigint;
  pinnedVersions: Record<string, string>;
  log: AppliedIntent[];
  updatedAt: Date | undefined;
  raw: pb.Session;
}

export function session(s: pb.Session): Session {
  const state: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.stateJson)) state[k] = jsonText(v);
  return {
    session: s.session, tenant: s.tenant, state, ended: s.ended, endReason: s.endReason,
    suppressAudio: s.suppressAudio, suppressTranscript: s.suppressTranscript, pendingMessage: s.pendingMessage,
    mode: s.mode, revision: s.revision, pinnedVersions: { ...s.pinnedVersions }, log: s.log.map(appliedIntent),
    updatedAt: date(s.updatedAt), raw: s,
  };
}

/** What applyIntents did: intents applied now, skipped (applied before) and refused (each with its reason). */
export interface ApplyIntentsResult {
  session: Session;
  applied: number;
  skipped: number;
  refused: AppliedIntent[];
}

/** A parked call's approval. state: PENDING, APPROVED, DENIED, EXPIRED. */
export interface Approval {
  id: string;
  state: string;
  tool: string;
  specVersion: string;
  argumentsJson: string;
  arguments: unknown;
  agent: string;
  session: string;
  reason: string;
  approver: string;
  scope: string;
  grantId: string;
  createdAt: Date | undefined;
  expiresAt: Date | undefined;
  decidedAt: Date | undefined;
  raw: PbApproval;
}

export function approval(a: PbApproval): Approval {
  return {
    id: a.id, state: enumName(ApprovalState, a.state), tool: a.tool, specVersion: a.specVersion,
    argumentsJson: a.argumentsJson, arguments: jsonText(a.argumentsJson), agent: a.caller?.agent ?? "",
    session: a.caller?.session ?? "", reason: a.reason, approver: a.approver, scope: enumName(ApprovalScope, a.scope),
    grantId: a.grantId, createdAt: date(a.createdAt), expiresAt: date(a.expiresAt), decidedAt: date(a.decidedAt), raw: a,
  };
}

/** A standing grant an approval made for a session, agent or tenant. */
export interface Grant {
  id: string;
  layer: string;
  agent: string;
  session: string;
  tool: string;
  args: Record<string, string>;
  expiresAt: Date | undefined;
  approvalId: string;
  approver: string;
  raw: PbGrant;
}

export function grant(g: PbGrant): Grant {
  return {
    id: g.id, layer: g.layer, agent: g.agent, session: g.session, tool: g.tool, args: { ...g.args },
    expiresAt: date(g.expiresAt), approvalId: g.approvalId, approver: g.approver, raw: g,
  };
}

/** What approve answered: the approval, and the grant for a session, agent or tenant scope. */
export interface ApproveResult {
  approval: Approval;
  grant: Grant | undefined;
}

/** A tool as the registry describes it (the native format). */
export interface ToolSpec {
  name: string;
  title: string;
  description: string;
  summary: string;
  version: string;
  executor: string;
  category: string;
  inputSchema: unknown;
  outputSchema: unknown;
  scopes: string[];
  intents: string[];
  requiresApproval: boolean;
  annotations: { readOnly?: boolean; destructive?: boolean; idempotent?: boolean; openWorld?: boolean };
  raw: PbToolSpec;
}

export function toolSpec(t: PbToolSpec): ToolSpec {
  const a = t.annotations;
  const annotations: ToolSpec["annotations"] = {};
  if (a?.readOnly !== undefined) annotations.readOnly = a.readOnly;
  if (a?.destructive !== undefined) annotations.destructive = a.destructive;
  if (a?.idempotent !== undefined) annotations.idempotent = a.idempotent;
  if (a?.openWorld !== undefined) annotations.openWorld = a.openWorld;
  return {
    name: t.name, title: t.title, description: t.description, summary: t.summary, version: t.version,
    executor: enumName(ExecutorType, t.executor), category: enumName(ToolCategory, t.category),
    inputSchema: jsonText(t.inputSchemaJson), outputSchema: jsonText(t.outputSchemaJson), scopes: [...t.scopes],
    intents: [...t.intents], requiresApproval: t.requiresApproval, annotations, raw: t,
  };
}

/** One limit of the policy in force, as it stands for one key. */
export interface LimitUsage {
  limit: string;
  key: string;
  value: string;
  reason: string;
  rateCount: number;
  /** Seconds. */
  ratePer: number | undefined;
  rateBurst: number;
  concurrency: number;
  inFlight: number;
  budgetUnits: number;
  /** Seconds. */
  budgetWindow: number | undefined;
  used: number;
  remaining: number;
  resetAt: Date | undefined;
  raw: pb.LimitUsage;
}

export function limitUsage(u: pb.LimitUsage): LimitUsage {
  return {
    limit: u.limit, key: u.key, value: u.value, reason: u.reason, rateCount: Number(u.rateCount),
    ratePer: seconds(u.ratePer), rateBurst: Number(u.rateBurst), concurrency: u.concurrency, inFlight: u.inFlight,
    budgetUnits: Number(u.budgetUnits), budgetWindow: seconds(u.budgetWindow), used: Number(u.used),
    remaining: Number(u.remaining), resetAt: date(u.resetAt), raw: u,
  };
}

/** The limits in force for a key, and the policy version they are from. */
export interface Usage {
  limits: LimitUsage[];
  policyVersion: string;
}
