// A tool written in TypeScript, served to the toolwire fleet as an HTTP
// service: a worker's HTTP executor turns each call of markdown_toc (the
// spec file markdown_toc.yaml) into one POST /toc with the call's
// arguments as its JSON body, and this server's answer into the result
// (a JSON object is the structured output; 400 is VALIDATION, 401 AUTH,
// 429 RATE_LIMIT with its Retry-After, 5xx TRANSIENT). Node's standard
// library only; Node 22.18 or later runs this file as it is (its types are
// erased), and `npx tsc` checks them.
//
// The tool, markdown_toc, lists the headings of a Markdown text with the
// anchors a renderer such as GitHub's gives them.
//
//   TOC_TOKEN=<secret> [PORT=8787] [HOST=127.0.0.1] node server.ts
//
// The server answers only requests that carry "Authorization: Bearer
// <TOC_TOKEN>" (the worker's secret header): an HTTP tool is a service
// anyone who reaches its port could call, so the worker must prove itself.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createHash, timingSafeEqual } from "node:crypto";

const MAX_BODY = 512 * 1024; // bytes of a request body; more is refused (413), never buffered
const DRAIN_MAX = 64 * 1024 * 1024; // bytes of a refused body read and discarded before the 413; more resets the connection
const MAX_MARKDOWN = 100_000; // characters of markdown, as the spec's input schema says
const MAX_HEADINGS = 1000; // headings listed at most; the rest are counted

interface Heading {
  level: number;
  text: string;
  anchor: string;
}

interface Toc {
  headings: Heading[];
  count: number;
}

/** A request the server refuses: its HTTP status and a message for the caller. */
class Refusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * The ATX headings (# to ######) of markdown down to maxDepth, outside
 * fenced code blocks. Every pattern is anchored and free of nested
 * repetition, and the closing #s are stripped by hand: a hostile line of
 * 100,000 spaces costs linear time, not quadratic.
 */
function toc(markdown: string, maxDepth: number): Toc {
  const headings: Heading[] = [];
  const used = new Map<string, number>();
  let count = 0;
  let fence = "";
  for (const line of markdown.split(/\r?\n/)) {
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (!fence) fence = f[1];
      else if (f[1][0] === fence[0] && f[1].length >= fence.length) fence = "";
      continue;
    }
    const m = fence ? null : /^ {0,3}(#{1,6})(?:[ \t]|$)/.exec(line);
    if (!m || m[1].length > maxDepth) continue;
    count++;
    if (headings.length === MAX_HEADINGS) continue;
    const text = headingText(line.slice(m[0].length));
    headings.push({ level: m[1].length, text, anchor: anchor(text, used) });
  }
  return { headings, count };
}

/** A heading's text without its optional closing sequence of #s ("## Title ##"). */
function headingText(rest: string): string {
  const s = rest.trim();
  let j = s.length;
  while (j > 0 && s[j - 1] === "#") j--;
  if (j === 0) return "";
  return s[j - 1] === " " || s[j - 1] === "\t" ? s.slice(0, j).trimEnd() : s;
}

/** GitHub's anchor of a heading: lower case, letters, digits, - and _; a repeat gets -1, -2, ... */
function anchor(text: string, used: Map<string, number>): string {
  const base = text.toLowerCase().replace(/[^\p{L}\p{N}\p{M} _-]/gu, "").replace(/ /g, "-");
  const n = used.get(base) ?? 0;
  used.set(base, n + 1);
  return n === 0 ? base : `${base}-${n}`;
}

/** The arguments of a call, checked again here: anyone reaching the port could send anything. */
function parseArgs(body: string): { markdown: string; maxDepth: number } {
  let args: unknown;
  try {
    args = JSON.parse(body);
  } catch {
    throw new Refusal(400, "the body is not JSON");
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new Refusal(400, "the arguments must be a JSON object");
  }
  const { markdown, max_depth: maxDepth = 3, ...rest } = args as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Refusal(400, `unknown argument ${JSON.stringify(unknown[0].slice(0, 64))}`);
  // The schema's maxLength counts characters (code points); a string's
  // length counts UTF-16 units, at most two a character: the cheap bound
  // first, then the count.
  if (typeof markdown !== "string" || markdown.length > 2 * MAX_MARKDOWN || [...markdown].length > MAX_MARKDOWN) {
    throw new Refusal(400, `markdown must be a string of at most ${MAX_MARKDOWN} characters`);
  }
  if (typeof maxDepth !== "number" || !Number.isInteger(maxDepth) || maxDepth < 1 || maxDepth > 6) {
    throw new Refusal(400, "max_depth must be an integer from 1 to 6");
  }
  return { markdown, maxDepth };
}

/**
 * The request's body as text, refused past MAX_BODY bytes: by its
 * Content-Length before anything is read, or as soon as a chunked body
 * passes the bound (the rest is read and discarded, never buffered).
 */
function readBody(req: IncomingMessage): Promise<string> {
  const tooLarge = () => new Refusal(413, `the body is over ${MAX_BODY} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > MAX_BODY) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      if (size > MAX_BODY) return; // refused already: the rest is discarded
      size += chunk.length;
      if (size > MAX_BODY) {
        chunks.length = 0;
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Whether the request carries the bearer token, compared in constant time. */
function authorized(req: IncomingMessage, token: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(req.headers.authorization ?? ""), digest(`Bearer ${token}`));
}

async function handle(req: IncomingMessage, token: string): Promise<Toc> {
  const path = (req.url ?? "").split("?", 1)[0]; // as sent: no parsing that could throw
  if (path !== "/toc") throw new Refusal(404, "not found");
  if (req.method !== "POST") throw new Refusal(405, "only POST");
  if (!authorized(req, token)) throw new Refusal(401, "a bearer token is required");
  if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
    throw new Refusal(415, "the body must be application/json");
  }
  const { markdown, maxDepth } = parseArgs(await readBody(req));
  return toc(markdown, maxDepth);
}

/** Sends the answer; a refused body's connection is closed after it (the rest is not a next request). */
function answer(res: ServerResponse, status: number, body: unknown): void {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (status === 405) headers.allow = "POST";
  if (status === 413) headers.connection = "close";
  try {
    res.writeHead(status, headers).end(JSON.stringify(body));
  } catch {
    res.destroy(); // the reply itself failed (headers already sent): end the connection
  }
}

function reply(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  const send = () => answer(res, status, body);
  if (status === 413 && !req.complete && !(Number(req.headers["content-length"] ?? 0) > DRAIN_MAX)) {
    // Answered once the rest of the body is read and discarded, and the
    // connection closed after: closed with bytes of the body unread, the
    // connection is reset, and a client still writing them loses this
    // answer. Bounded by DRAIN_MAX bytes and by requestTimeout (which
    // Node checks every connectionsCheckingInterval: within a minute, a
    // 408); past either, the connection is reset. A body declared longer
    // than DRAIN_MAX is answered at once.
    let drained = 0;
    req.on("data", (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_MAX) req.destroy();
    });
    req.once("end", send);
    req.resume();
    return;
  }
  send();
}

function serve(token: string) {
  const server = createServer((req, res) => {
    // .catch after .then: an error replying 200 is answered too, and
    // nothing is left as an unhandled rejection (which ends the process).
    handle(req, token)
      .then((out) => reply(req, res, 200, out))
      .catch((err: unknown) => {
        try {
          if (err instanceof Refusal) return reply(req, res, err.status, { error: err.message });
          console.error("markdown_toc:", err); // a bug of the tool: the caller sees a 500, not the details
          reply(req, res, 500, { error: "internal error" });
        } catch {
          res.destroy(); // the reply itself failed (headers already sent): end the connection
        }
      });
  });
  // A client that waits for "100 Continue" before it sends a body the
  // server would refuse for its length is answered 413 without it.
  server.on("checkContinue", (req, res) => {
    if (authorized(req, token) && Number(req.headers["content-length"] ?? 0) > MAX_BODY) {
      answer(res, 413, { error: `the body is over ${MAX_BODY} bytes` });
      return;
    }
    res.writeContinue();
    server.emit("request", req, res);
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000; // a slow body is cut off, not waited for
  return server;
}

function main(): void {
  const token = process.env.TOC_TOKEN ?? "";
  if (token.length < 16) {
    console.error("markdown_toc: set TOC_TOKEN to a secret of at least 16 characters (the worker sends it as a bearer token)");
    process.exit(2);
  }
  const port = Number(process.env.PORT ?? 8787);
  const host = process.env.HOST ?? "127.0.0.1";
  const server = serve(token);
  server.listen(port, host, () => {
    const addr = server.address();
    if (addr !== null && typeof addr === "object") console.log(`listening on http://${host}:${addr.port}`);
  });
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      server.close();
      server.closeIdleConnections();
    });
  }
}

main();
