// The client's own path for unary RPCs: Connect's unary protocol
// (https://connectrpc.com/docs/protocol) spoken directly over node:http(s)
// and over a stream of the client's one HTTP/2 connection (connect-node's
// Http2SessionManager, which the watches share), without connect-es's
// per-call machinery.
//
// Why: a CPU profile of the client (BENCHMARKS.md, "HTTP/2 (2026-11-30)")
// put most of its cost a call in connect-es's plumbing, not in the request:
// every finished call aborts its linked AbortController (a DOMException and
// a ConnectError, each with a stack trace), the body travels through async
// iterators and a sentinel's promise race, and interceptors wrap each
// request. Here a call is one promise, one timer for its deadline, and an
// abort listener only when the caller gave a signal; nothing is allocated
// for a call that ends normally beyond the request, its answer and the
// decoded message. Server streams (Watch) stay on connect-es.
//
// What it speaks (as connect-es does, so that a failure is the same
// ConnectError, and so the same TransportError, as before):
//
// - POST <base>/<service>/<Method>, Content-Type application/json (or
//   application/proto), Connect-Protocol-Version 1, Connect-Timeout-Ms, the
//   client's User-Agent and Authorization; the body is protobuf-es's
//   toJsonString (or toBinary) of the request; no compression.
// - 200 with the same content type: the body decoded with fromJsonString
//   (unknown fields ignored, as connect-es does) or fromBinary.
// - Another status with a JSON content type: Connect's error JSON (code,
//   message, details with type, base64 value and debug), its code falling
//   back to the status's (Connect's HTTP-to-code table); any other answer
//   is the status's code with the message "HTTP <status>".
// - The answer is bounded before it is read whole: a Content-Length over
//   the limit is refused at once, a body growing past it while read too
//   (resource_exhausted; the client's maxMessageBytes, 64 MiB by default).
// - An answer cut off is refused, never decoded (a binary message cut at a
//   field's boundary decodes as a shorter one): a body not as long as its
//   Content-Length is invalid_argument "protocol error: promised N bytes,
//   received M", as connect-es says it; an HTTP/2 stream reset or session
//   dropped mid-answer is the reset's error even when Node ends the
//   stream's reading for it.
// - Node's errors map as connect-node maps them (ECONNREFUSED and the like
//   unavailable, ECONNRESET aborted, others internal), an HTTP/2 stream
//   reset by its RST code, the deadline to deadline_exceeded "the operation
//   timed out"; an abort rejects with the signal's reason and ends the
//   request (HTTP/1.1: the socket is destroyed; HTTP/2: the stream is reset
//   with CANCEL).

import * as http from "node:http";
import * as http2 from "node:http2";
import * as https from "node:https";
import {
  create,
  fromBinary,
  fromJsonString,
  toBinary,
  toJsonString,
  type DescMessage,
  type DescMethodUnary,
  type JsonValue,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";

/** Connect's error codes in snake case, as TransportError.code gives them. */
export const codeNames: Record<number, string> = {
  [Code.Canceled]: "canceled", [Code.Unknown]: "unknown", [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded", [Code.NotFound]: "not_found", [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied", [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition", [Code.Aborted]: "aborted", [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented", [Code.Internal]: "internal", [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss", [Code.Unauthenticated]: "unauthenticated",
};

const codeByName = new Map(Object.entries(codeNames).map(([k, v]) => [v, Number(k) as Code]));

/** The longest timer Node keeps (a longer one fires at once). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Connect's content types, unary and streaming, JSON (with an optional UTF-8 charset) or binary. */
const contentTypeRe = /^application\/(connect\+)?(?:(json)(?:; ?charset=utf-?8)?|(proto))$/i;

/** What a unary request is given. */
export interface UnaryCallOptions {
  signal?: AbortSignal;
  timeoutMs: number;
}

/** How the client's unary path reaches the dispatcher. */
export interface UnaryConfig {
  /** The base URL, without a trailing slash (a path prefix is kept). */
  base: URL;
  json: boolean;
  /** Largest request and answer, in bytes. */
  maxBytes: number;
  userAgent: string;
  apiKey?: string;
  /** HTTP/1.1: the client's agent. */
  agent?: http.Agent;
  /** HTTP/2: the client's connection (shared with its watches). */
  session?: Http2SessionManager;
}

/** An answer's head: status and the headers the protocol looks at. */
interface Head {
  status: number;
  contentType: string | undefined;
  encoding: string | undefined;
  length: string | undefined;
}

/** The unary RPCs of a client: one `call` per request. */
export class Unary {
  private readonly prefix: string;
  private readonly headers: Record<string, string>;
  private readonly readOpts = { ignoreUnknownFields: true };
  private readonly h1?: { agent: http.Agent; hostname: string; port: string; request: typeof http.request };

  constructor(private readonly cfg: UnaryConfig) {
    this.prefix = cfg.base.pathname.replace(/\/+$/, "");
    this.headers = {
      "content-type": cfg.json ? "application/json" : "application/proto",
      "connect-protocol-version": "1",
      "user-agent": cfg.userAgent,
    };
    if (cfg.apiKey) this.headers.authorization = "Bearer " + cfg.apiKey;
    if (cfg.agent) {
      const tls = cfg.base.protocol === "https:";
      this.h1 = {
        agent: cfg.agent,
        hostname: cfg.base.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: cfg.base.port || (tls ? "443" : "80"),
        request: tls ? https.request : http.request,
      };
    }
  }

  /** One unary RPC: the answer's message, or a ConnectError (the signal's reason when it aborted). */
  async call<I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>,
    input: MessageInitShape<I>, o: UnaryCallOptions): Promise<MessageShape<O>> {
    if (o.signal?.aborted) throw o.signal.reason;
    const body = this.encode(method.input, input);
    const timeoutMs = Math.min(Math.max(Math.round(o.timeoutMs), 1), MAX_TIMEOUT_MS);
    const headers = { ...this.headers, "connect-timeout-ms": String(timeoutMs) };
    const path = `${this.prefix}/${method.parent.typeName}/${method.name}`;
    const exchange = new Exchange(this.cfg.maxBytes, this.cfg.json, o.signal, timeoutMs);
    try {
      if (this.h1) this.sendH1(exchange, path, headers, body);
      else this.sendH2(exchange, path, headers, body);
    } catch (e) {
      exchange.fail(nodeError(e));
    }
    const bytes = await exchange.done;
    return this.decode(method.output, bytes);
  }

  private encode<I extends DescMessage>(desc: I, input: MessageInitShape<I>): Uint8Array {
    let body: Uint8Array;
    const msg = create(desc, input);
    try {
      body = this.cfg.json ? Buffer.from(toJsonString(desc, msg)) : toBinary(desc, msg);
    } catch (e) {
      const m = e instanceof Error ? e.message : String(e);
      throw new ConnectError(this.cfg.json ? m : `serialize binary: ${m}`, Code.Internal);
    }
    if (body.byteLength > this.cfg.maxBytes) {
      throw new ConnectError(`message size ${body.byteLength} is larger than configured writeMaxBytes ${this.cfg.maxBytes}`, Code.ResourceExhausted);
    }
    return body;
  }

  private decode<O extends DescMessage>(desc: O, bytes: Buffer): MessageShape<O> {
    try {
      // A Uint8Array view (not a Buffer), so that bytes fields are what connect-es gives.
      return this.cfg.json ? fromJsonString(desc, bytes.toString("utf8"), this.readOpts)
        : fromBinary(desc, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (e) {
      const m = e instanceof Error ? e.message : String(e);
      throw this.cfg.json ? new ConnectError(m, Code.InvalidArgument) : new ConnectError(`parse binary: ${m}`, Code.Internal);
    }
  }

  private sendH1(x: Exchange, path: string, headers: Record<string, string>, body: Uint8Array): void {
    const h1 = this.h1!;
    headers["content-length"] = String(body.byteLength);
    const req = h1.request({ agent: h1.agent, hostname: h1.hostname, port: h1.port, path, method: "POST", headers });
    x.onFail = () => req.destroy();
    // Node reports a write after the request's end once the answer has come
    // (the server answered before reading it all): connect-node ignores it.
    req.on("error", (e) => x.settled || (req.writableEnded && writeAfterEnd(e)) || x.fail(nodeError(e)));
    req.on("response", (res) => {
      res.on("error", (e) => x.settled || x.fail(nodeError(e)));
      // (Errors are made only when needed: "close" comes after every answer's "end".)
      res.on("close", () => x.settled || x.fail(new ConnectError("the answer ended before it was complete", Code.Internal)));
      const h = res.headers;
      if (!x.head({ status: res.statusCode ?? 0, contentType: h["content-type"], encoding: h["content-encoding"], length: h["content-length"] })) return;
      res.on("data", (chunk: Buffer) => x.data(chunk));
      res.on("end", () => x.end());
    });
    req.end(body);
  }

  private sendH2(x: Exchange, path: string, headers: Record<string, string>, body: Uint8Array): void {
    const sm = this.cfg.session!;
    sm.request("POST", path, headers, {}).then((stream) => {
      if (x.settled) {
        stream.on("error", () => undefined);
        stream.close(http2.constants.NGHTTP2_CANCEL);
        return;
      }
      x.onFail = () => {
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      };
      stream.on("error", (e) => x.settled || (stream.writableEnded && writeAfterEnd(e)) || x.fail(nodeError(e)));
      stream.on("close", () => x.settled || x.fail(resetError(stream.rstCode)));
      stream.on("response", (h) => {
        const status = Number(h[":status"] ?? 0);
        const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
        if (!x.head({ status, contentType: one(h["content-type"]), encoding: one(h["content-encoding"]), length: one(h["content-length"]) })) return;
        stream.on("data", (chunk: Buffer) => {
          sm.notifyResponseByteRead(stream);
          x.data(chunk);
        });
        // Node ends a stream's reading also when the stream is reset or its
        // session dropped mid-answer: such an end is the reset's error, not
        // the answer's end (a NO_ERROR reset leaves it to the Content-Length).
        stream.on("end", () => (stream.closed && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR
          ? x.fail(resetError(stream.rstCode)) : x.end()));
      });
      stream.end(body);
    }, (e: unknown) => x.fail(nodeError(e)))
      // Whatever throws above fails the call, not the process (an unhandled rejection).
      .catch((e: unknown) => x.fail(nodeError(e)));
  }
}

/**
 * One request's answer as it arrives: its deadline and abort, the checks
 * of its head, its body within the limit, and its outcome (`done`).
 */
class Exchange {
  readonly done: Promise<Buffer>;
  settled = false;
  /** Ends the request (set once it exists). */
  onFail?: () => void;
  private resolve!: (b: Buffer) => void;
  private reject!: (e: unknown) => void;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort?: () => void;
  private chunks: Buffer[] = [];
  private size = 0;
  /** The answer's Content-Length, when it gives one. */
  private length?: number;
  /** The answer is Connect's error JSON; this error if it is not. */
  private errorFallback?: ConnectError;

  constructor(private readonly maxBytes: number, private readonly json: boolean,
    private readonly signal: AbortSignal | undefined, timeoutMs: number) {
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(() => this.fail(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    if (signal) {
      this.onAbort = () => this.fail(signal.reason);
      signal.addEventListener("abort", this.onAbort, { once: true });
    }
  }

  /** Checks the answer's head; false when the exchange failed on it. */
  head(h: Head): boolean {
    if (this.settled) return false;
    if (h.encoding !== undefined && h.encoding.toLowerCase() !== "identity") {
      this.fail(new ConnectError(`unsupported response encoding "${h.encoding}"`, Code.Internal));
      return false;
    }
    const type = h.contentType === undefined ? undefined : contentTypeRe.exec(h.contentType);
    if (h.status !== 200) {
      const fromStatus = new ConnectError(`HTTP ${h.status}`, codeFromHttpStatus(h.status));
      if (!type || type[3]) {
        this.fail(fromStatus);
        return false;
      }
      this.errorFallback = fromStatus;
    } else if (!type || Boolean(type[3]) === this.json || type[1]) {
      this.fail(new ConnectError(`unsupported content type ${h.contentType}`, type ? Code.Internal : Code.Unknown));
      return false;
    }
    // Content-Length read as connect-es reads it (parseInt: a safe integer, not negative).
    const n = h.length === undefined ? Number.NaN : parseInt(h.length, 10);
    if (Number.isSafeInteger(n) && n >= 0) {
      if (n > this.maxBytes) {
        this.fail(new ConnectError(`message size ${n} is larger than configured readMaxBytes ${this.maxBytes}`, Code.ResourceExhausted));
        return false;
      }
      this.length = n;
    }
    return true;
  }

  data(chunk: Buffer): void {
    if (this.settled) return;
    this.size += chunk.byteLength;
    if (this.length !== undefined && this.size > this.length) {
      this.fail(promisedError(this.length, this.size));
      return;
    }
    if (this.size > this.maxBytes) {
      this.fail(new ConnectError(`message size is larger than configured readMaxBytes ${this.maxBytes}`, Code.ResourceExhausted));
      return;
    }
    this.chunks.push(chunk);
  }

  end(): void {
    if (this.settled) return;
    // An answer cut off (a stream reset with NO_ERROR, a connection closed)
    // is refused, not decoded: a binary message cut at a field's boundary
    // would decode as a shorter one.
    if (this.length !== undefined && this.size !== this.length) {
      this.fail(promisedError(this.length, this.size));
      return;
    }
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.finish();
    if (this.errorFallback) this.reject(errorFromJson(body, this.errorFallback));
    else this.resolve(body);
  }

  /** Fails the exchange (once) and ends the request. */
  fail(e: unknown): void {
    if (this.settled) return;
    this.finish();
    this.onFail?.();
    this.reject(e);
  }

  private finish(): void {
    this.settled = true;
    this.chunks = [];
    clearTimeout(this.timer);
    if (this.onAbort) this.signal!.removeEventListener("abort", this.onAbort);
  }
}

/** Connect's error JSON in an answer, or `fallback` when the body is not one (as connect-es reads it). */
export function errorFromJson(body: Buffer, fallback: ConnectError): ConnectError {
  let v: unknown;
  try {
    v = JSON.parse(body.toString("utf8"));
  } catch {
    return fallback;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return fallback;
  const o = v as Record<string, unknown>;
  const code = (typeof o.code === "string" ? codeByName.get(o.code) : undefined) ?? fallback.code;
  if (o.message != null && typeof o.message !== "string") return fallback;
  const err = new ConnectError((o.message as string | undefined) ?? "", code);
  if (Array.isArray(o.details)) {
    for (const d of o.details as unknown[]) {
      if (d === null || typeof d !== "object" || Array.isArray(d)) return fallback;
      const detail = d as Record<string, unknown>;
      if (typeof detail.type !== "string" || typeof detail.value !== "string") return fallback;
      try {
        err.details.push({ type: detail.type, value: base64Decode(detail.value), debug: detail.debug as JsonValue | undefined });
      } catch {
        return fallback;
      }
    }
  }
  return err;
}

/** Connect's code for an HTTP status without a Connect error (https://connectrpc.com/docs/protocol/#http-to-error-code). */
export function codeFromHttpStatus(status: number): Code {
  switch (status) {
    case 400: return Code.Internal;
    case 401: return Code.Unauthenticated;
    case 403: return Code.PermissionDenied;
    case 404: return Code.Unimplemented;
    case 429: case 502: case 503: case 504: return Code.Unavailable;
    default: return Code.Unknown;
  }
}

/** An answer whose body is not as long as its Content-Length, as connect-es says it. */
function promisedError(length: number, size: number): ConnectError {
  return new ConnectError(`protocol error: promised ${length} bytes, received ${size}`, Code.InvalidArgument);
}

/** The codes of a Node.js error and of its causes. */
function errorCodes(e: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  for (let c = e; c instanceof Error && !seen.has(c); c = c.cause) {
    seen.add(c);
    const code = (c as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
  }
  return codes;
}

/** A write after a request's end, which connect-node ignores once the request's writing has ended. */
function writeAfterEnd(e: unknown): boolean {
  return errorCodes(e).includes("ERR_STREAM_WRITE_AFTER_END");
}

/** A Node.js error as connect-node makes it a ConnectError. */
function nodeError(e: unknown): ConnectError {
  if (e instanceof ConnectError) return e;
  const codes = errorCodes(e);
  let code = Code.Internal;
  if (codes.includes("ERR_STREAM_WRITE_AFTER_END")) code = Code.Aborted;
  else if (codes.some((c) => c === "ERR_STREAM_DESTROYED" || c === "ERR_HTTP2_INVALID_STREAM" || c === "ECONNRESET")) code = Code.Aborted;
  else if (codes.some((c) => c === "ETIMEDOUT" || c === "ENOTFOUND" || c === "EAI_AGAIN" || c === "ECONNREFUSED")) code = Code.Unavailable;
  return ConnectError.from(e, code);
}

/** HTTP/2 error codes by number (RFC 9113, section 7). */
const h2CodeNames = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
  "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"];

/** Connect's code for an HTTP/2 stream reset, as connect-node maps it (none for NO_ERROR and STREAM_CLOSED). */
const h2ResetCodes: Record<string, Code> = {
  PROTOCOL_ERROR: Code.Internal, INTERNAL_ERROR: Code.Internal, FLOW_CONTROL_ERROR: Code.Internal,
  SETTINGS_TIMEOUT: Code.Internal, FRAME_SIZE_ERROR: Code.Internal, COMPRESSION_ERROR: Code.Internal,
  CONNECT_ERROR: Code.Internal, REFUSED_STREAM: Code.Unavailable, CANCEL: Code.Canceled,
  ENHANCE_YOUR_CALM: Code.ResourceExhausted, INADEQUATE_SECURITY: Code.PermissionDenied,
  HTTP_1_1_REQUIRED: Code.PermissionDenied,
};

/** An HTTP/2 stream closed before its answer ended, by its RST code. */
function resetError(rstCode: number): ConnectError {
  const name = h2CodeNames[rstCode];
  const code = name === undefined ? undefined : h2ResetCodes[name];
  if (code === undefined) return new ConnectError("the answer ended before it was complete", Code.Internal);
  return new ConnectError(`http/2 stream closed with error code ${name} (0x${rstCode.toString(16)})`, code);
}
