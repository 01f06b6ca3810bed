// Typed views of the API's messages. Each keeps the generated message it
// was made from in `raw`, so a field this version does not model is still
// there. Enum values are given by their short names ("DONE", "PROGRESS",
// "RATE_LIMIT"), durations as seconds (numbers, as HTTP's Retry-After and
// the Python client), timestamps as Dates, and JSON text fields also
// decoded (structured, payload, inputSchema, arguments).
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ApprovalRequiredError, ToolError, toolErrorClass, } from "./errors.js";
import { CallEventType } from "./gen/toolwire/v1/event_pb.js";
import { ErrorType, PartialSideEffects } from "./gen/toolwire/v1/error_pb.js";
import { ApprovalScope, ApprovalState } from "./gen/toolwire/v1/policy_pb.js";
import { ExecutorType, ToolCategory } from "./gen/toolwire/v1/spec_pb.js";
/** A protobuf Duration as seconds; undefined when unset. */
export function seconds(d) {
    if (!d)
        return undefined;
    return Number(d.seconds) + d.nanos / 1e9;
}
/** A protobuf Timestamp as a Date; undefined when unset. */
export function date(t) {
    return t ? timestampDate(t) : undefined;
}
/** JSON text decoded; undefined when empty or not JSON. */
export function jsonText(s) {
    if (!s)
        return undefined;
    try {
        return JSON.parse(s);
    }
    catch {
        return undefined;
    }
}
function enumName(e, v) {
    return e[v] ?? "UNSPECIFIED";
}
/** The typed ToolError of an envelope's error object. */
export function toolError(e, callId = "", tool = "") {
    const type = enumName(ErrorType, e.type);
    const init = {
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
export function content(c) {
    const out = { kind: "unknown", text: "", data: new Uint8Array(), mimeType: "", uri: "", name: "", raw: c };
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
/**
 * A call's terminal response (the envelope), which may be a tool error:
 * `ok` is false when `error` holds the typed ToolError; throwIfError()
 * throws it. `text` joins the text blocks.
 */
export class Result {
    raw;
    callId;
    ok;
    tool;
    content;
    structuredJson;
    structured;
    error;
    intents;
    meta;
    /** The session after applying the intents (applyIntents: true). */
    session;
    /** Why the intents could not be applied (applyIntents: true). */
    applyError = "";
    constructor(callId, raw, rejection) {
        this.raw = raw;
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
        if (rejection)
            this.error = rejection;
        else if (!this.ok) {
            this.error = r?.error
                ? toolError(r.error, this.callId, this.tool)
                : new (toolErrorClass("INTERNAL"))({ message: "the response is not ok but carries no error", sideEffects: "UNKNOWN", callId: this.callId, tool: this.tool });
        }
    }
    /** The text blocks joined by newlines (the structured JSON when there is none; the error's message for a failed call). */
    get text() {
        const texts = this.content.filter((c) => c.kind === "text").map((c) => c.text);
        if (texts.length)
            return texts.join("\n");
        if (this.error)
            return this.error.message;
        return this.structuredJson;
    }
    /** Throw the call's ToolError, if it failed; return this otherwise. */
    throwIfError() {
        if (this.error)
            throw this.error;
        return this;
    }
}
const terminalTypes = new Set(["FINISHED", "REJECTED"]);
/**
 * A lifecycle or progress event of a call (what watch yields). `type` is
 * "ACCEPTED", "STARTED", "PROGRESS", "RETRYING", "CANCEL_REQUESTED",
 * "FINISHED", "REJECTED", "AWAITING_APPROVAL", "APPROVED",
 * "APPROVAL_DENIED", "APPROVAL_EXPIRED" or "LATENCY_BUDGET_EXCEEDED".
 */
export class CallEvent {
    raw;
    callId;
    type;
    time;
    attempt;
    worker;
    message;
    percent;
    partial;
    error;
    retryDelay;
    tool;
    /** The terminal response, on FINISHED (the rejection, on REJECTED). */
    result;
    constructor(raw) {
        this.raw = raw;
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
        if (this.type === "FINISHED" && e.response)
            this.result = new Result(e.callId, e.response);
        else if (this.type === "REJECTED" && this.error)
            this.result = new Result(e.callId, undefined, this.error);
    }
    /** FINISHED or REJECTED: the last event of a call. */
    get terminal() {
        return terminalTypes.has(this.type);
    }
    /**
     * Identifies the event among its call's events (watch resumes by it). A
     * call has one terminal event, which the dispatcher may build anew (with
     * a new time) for each watch: its key is its type.
     */
    key() {
        if (this.terminal)
            return this.type;
        const t = this.raw.time;
        return [this.type, t ? `${t.seconds}.${t.nanos}` : "", this.attempt, this.worker, this.message, this.percent ?? "", this.raw.partialSeq].join("|");
    }
}
export function appliedIntent(a) {
    return { callId: a.callId, intentId: a.intentId, type: a.type, payloadJson: a.payloadJson, refused: a.refused, appliedAt: date(a.appliedAt) };
}
export function session(s) {
    const state = {};
    for (const [k, v] of Object.entries(s.stateJson))
        state[k] = jsonText(v);
    return {
        session: s.session, tenant: s.tenant, state, ended: s.ended, endReason: s.endReason,
        suppressAudio: s.suppressAudio, suppressTranscript: s.suppressTranscript, pendingMessage: s.pendingMessage,
        mode: s.mode, revision: s.revision, pinnedVersions: { ...s.pinnedVersions }, log: s.log.map(appliedIntent),
        updatedAt: date(s.updatedAt), raw: s,
    };
}
export function approval(a) {
    return {
        id: a.id, state: enumName(ApprovalState, a.state), tool: a.tool, specVersion: a.specVersion,
        argumentsJson: a.argumentsJson, arguments: jsonText(a.argumentsJson), agent: a.caller?.agent ?? "",
        session: a.caller?.session ?? "", reason: a.reason, approver: a.approver, scope: enumName(ApprovalScope, a.scope),
        grantId: a.grantId, createdAt: date(a.createdAt), expiresAt: date(a.expiresAt), decidedAt: date(a.decidedAt), raw: a,
    };
}
export function grant(g) {
    return {
        id: g.id, layer: g.layer, agent: g.agent, session: g.session, tool: g.tool, args: { ...g.args },
        expiresAt: date(g.expiresAt), approvalId: g.approvalId, approver: g.approver, raw: g,
    };
}
export function toolSpec(t) {
    const a = t.annotations;
    const annotations = {};
    if (a?.readOnly !== undefined)
        annotations.readOnly = a.readOnly;
    if (a?.destructive !== undefined)
        annotations.destructive = a.destructive;
    if (a?.idempotent !== undefined)
        annotations.idempotent = a.idempotent;
    if (a?.openWorld !== undefined)
        annotations.openWorld = a.openWorld;
    return {
        name: t.name, title: t.title, description: t.description, summary: t.summary, version: t.version,
        executor: enumName(ExecutorType, t.executor), category: enumName(ToolCategory, t.category),
        inputSchema: jsonText(t.inputSchemaJson), outputSchema: jsonText(t.outputSchemaJson), scopes: [...t.scopes],
        intents: [...t.intents], requiresApproval: t.requiresApproval, annotations, raw: t,
    };
}
export function limitUsage(u) {
    return {
        limit: u.limit, key: u.key, value: u.value, reason: u.reason, rateCount: Number(u.rateCount),
        ratePer: seconds(u.ratePer), rateBurst: Number(u.rateBurst), concurrency: u.concurrency, inFlight: u.inFlight,
        budgetUnits: Number(u.budgetUnits), budgetWindow: seconds(u.budgetWindow), used: Number(u.used),
        remaining: Number(u.remaining), resetAt: date(u.resetAt), raw: u,
    };
}
