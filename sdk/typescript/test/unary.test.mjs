// The client's own unary path (src/unary.ts: Connect's unary protocol over
// node:http and HTTP/2, past connect-es's per-call machinery), over each
// HTTP version and wire format: against the real stack (answers, tool
// errors, an unauthenticated call, an oversized answer refused, an abort
// mid-call that reaches the worker), and against real HTTP servers of the
// test's own that answer what a dispatcher does not (Connect error JSON
// with details, bare HTTP errors, wrong content types, a body past the
// limit, a request never answered), each failure compared with what
// connect-es (the client's `rpc`) makes of the same answer.
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";

import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import * as tw from "../dist/index.js";
import { CallState, GetResultResponseSchema } from "../dist/gen/toolwire/v1/dispatcher_pb.js";
import { API_KEY, URL, needsStack } from "./stack.mjs";

const CONFIGS = [
  { httpVersion: "1.1", json: false },
  { httpVersion: "1.1", json: true },
  { httpVersion: "2", json: false },
  { httpVersion: "2", json: true },
];
const label = (c) => `HTTP/${c.httpVersion} ${c.json ? "JSON" : "binary"}`;

describe("the unary path against the stack", { skip: needsStack }, () => {
  for (const config of CONFIGS) {
    describe(label(config), () => {
      let client;
      before(() => {
        client = new tw.Client(URL, { apiKey: API_KEY, ...config });
      });
      after(() => client.close());

      test("an answer, a validation error and a policy deny", async () => {
        const res = await client.call("echo", { text: `over ${label(config)}` });
        assert.equal(res.text, `over ${label(config)}`);
        const bad = await client.call("echo", { text: 7 });
        assert.ok(bad.error instanceof tw.ValidationError, String(bad.error));
        assert.ok(bad.error.violations.some((v) => v.field === "/text"), JSON.stringify(bad.error.violations));
        assert.equal(bad.error.sideEffects, "NONE");
        const denied = await client.call("echo", { text: "secret plans" });
        assert.ok(denied.error instanceof tw.PermissionDeniedError, String(denied.error));
        assert.match(denied.error.rawMessage, /secrets are never echoed/);
        const sub = await client.submit("echo", { text: "submitted" });
        assert.equal((await client.getResult(sub.callId, { wait: 30 })).text, "submitted");
      });

      test("an unauthenticated call is a transport error", async () => {
        const bad = new tw.Client(URL, { apiKey: "not-a-key", ...config });
        try {
          for (const f of [() => bad.call("echo", { text: "x" }), () => bad.submit("echo", { text: "x" }), () => bad.getResult("01ARZ3NDEKTSV4RRFFQ69G5FAV")]) {
            const err = await f().catch((e) => e);
            assert.ok(err instanceof tw.TransportError, String(err));
            assert.equal(err.code, "unauthenticated");
            assert.ok(err.rawMessage, "the dispatcher's message");
          }
        } finally {
          bad.close();
        }
      });

      test("an answer over the client's limit is refused", async () => {
        const text = "x".repeat(4000);
        const sub = await client.submit("echo", { text });
        const small = new tw.Client(URL, { apiKey: API_KEY, ...config, maxMessageBytes: 1024 });
        try {
          const err = await small.getResult(sub.callId, { wait: 30 }).catch((e) => e);
          assert.ok(err instanceof tw.TransportError, String(err));
          assert.equal(err.code, "resource_exhausted");
          assert.match(err.rawMessage, /larger than configured readMaxBytes 1024/);
          // A request over the limit is not sent.
          const big = await small.call("echo", { text }).catch((e) => e);
          assert.ok(big instanceof tw.TransportError, String(big));
          assert.equal(big.code, "resource_exhausted");
          assert.match(big.rawMessage, /larger than configured writeMaxBytes 1024/);
          assert.equal((await small.call("echo", { text: "small" })).text, "small", "the client goes on");
        } finally {
          small.close();
        }
        assert.equal((await client.getResult(sub.callId, { wait: 30 })).text, text, "within the default limit");
      });

      test("an abort mid-call rejects with its reason and cancels the call on the worker", async () => {
        const ac = new AbortController();
        let callId = "";
        const done = client.call("hold", {}, {
          signal: ac.signal,
          onSubmitted: (id) => {
            callId = id;
            runningOnWorker(client, id).then(() => ac.abort(new Error("enough")), (e) => ac.abort(e));
          },
        });
        await assert.rejects(done, /enough/);
        const res = await client.getResult(callId, { wait: 30 });
        assert.ok(res.error instanceof tw.CallCancelledError, String(res.error));
        assert.equal(res.meta.cancelReason, "aborted by the caller");
        assert.equal((await client.call("echo", { text: "after" })).text, "after", "the connection goes on");
      });
    });
  }
});

test("maxMessageBytes is checked", () => {
  for (const maxMessageBytes of [0, -1, 1.5, tw.MAX_MESSAGE_BYTES + 1, Number.NaN]) {
    assert.throws(() => new tw.Client("http://127.0.0.1:8080", { maxMessageBytes }), RangeError, String(maxMessageBytes));
  }
});

/** The answers of the test's servers, by the call id a GetResult asks for. */
const ANSWERS = {
  "sc-details": (res) => send(res, 429, { "content-type": "application/json" }, JSON.stringify({
    code: "resource_exhausted", message: "slow down",
    details: [{ type: "google.rpc.RetryInfo", value: "CgIIBQ", debug: { retryDelay: "5s" } }],
  })),
  "sc-unknown-code": (res) => send(res, 500, { "content-type": "application/json" }, '{"code":"not_a_code","message":"odd"}'),
  "sc-no-message": (res) => send(res, 403, { "content-type": "application/json; charset=utf-8" }, '{"code":"permission_denied"}'),
  "sc-bad-detail": (res) => send(res, 400, { "content-type": "application/json" }, '{"code":"invalid_argument","message":"x","details":[{"type":7}]}'),
  "sc-not-json": (res) => send(res, 502, { "content-type": "application/json" }, "<html>bad gateway</html>"),
  "sc-plain-503": (res) => send(res, 503, { "content-type": "text/plain" }, "upstream down"),
  "sc-plain-401": (res) => send(res, 401, {}, ""),
  "sc-proto-404": (res) => send(res, 404, { "content-type": "application/proto" }, ""),
  "sc-html-200": (res) => send(res, 200, { "content-type": "text/html" }, "<html></html>"),
  "sc-stream-200": (res) => send(res, 200, { "content-type": "application/connect+json" }, "{}"),
  "sc-gzip-200": (res, json) => send(res, 200, { "content-type": json ? "application/json" : "application/proto", "content-encoding": "gzip" }, "\x1f\x8b"),
  "sc-big-length": (res, json) => send(res, 200, { "content-type": json ? "application/json" : "application/proto" }, " ".repeat(2048)),
  "sc-big-chunked": (res, json) => {
    res.writeHead(200, { "content-type": json ? "application/json" : "application/proto" });
    for (let i = 0; i < 3; i++) res.write(" ".repeat(600));
    res.end();
  },
  // Answers cut off after a part of their body (HTTP/2: the stream reset
  // with CANCEL or NO_ERROR, the session dropped; HTTP/1.1: the socket
  // closed), each cut at a field's boundary: a binary message would decode.
  "sc-cut-cancel": (res, json) => cutOff(res, json, (r) => r.stream.close(http2.constants.NGHTTP2_CANCEL)),
  "sc-cut-no-error": (res, json) => cutOff(res, json, (r) => r.stream.close(http2.constants.NGHTTP2_NO_ERROR)),
  "sc-cut-session": (res, json) => cutOff(res, json, (r) => r.stream.session.destroy()),
  "sc-cut-socket": (res, json) => cutOff(res, json, (r) => r.socket.destroy()),
  "sc-ok": (res, json) => {
    const msg = create(GetResultResponseSchema, { callId: "sc-ok", state: CallState.DONE, response: { tool: "echo" } });
    if (json) {
      // A field this version does not know is ignored, as connect-es ignores it.
      send(res, 200, { "content-type": "application/json" }, '{"callId":"sc-ok","state":"CALL_STATE_DONE","response":{"tool":"echo"},"aFieldFromTheFuture":{"x":1}}');
    } else {
      send(res, 200, { "content-type": "application/proto" }, Buffer.concat([toBinary(GetResultResponseSchema, msg), Buffer.from([0xc0, 0x3e, 0x01])]));
    }
  },
};

/** The HTTP version a cut-off answer is for (the others answer it as any unknown scenario). */
const CUT_OFF = { "sc-cut-cancel": "2", "sc-cut-no-error": "2", "sc-cut-session": "2", "sc-cut-socket": "1.1" };

/**
 * A GetResult answer whose head promises its whole body and whose first
 * field (the call id) alone is sent before `cut` ends it; then the rest
 * would follow.
 */
function cutOff(res, json, cut) {
  const msg = create(GetResultResponseSchema, { callId: "sc-cut", state: CallState.DONE, response: { tool: "echo" } });
  const whole = json ? Buffer.from(JSON.stringify({ callId: "sc-cut", state: "CALL_STATE_DONE", response: { tool: "echo" } }))
    : Buffer.from(toBinary(GetResultResponseSchema, msg));
  const part = json ? whole.subarray(0, 10) : whole.subarray(0, 2 + "sc-cut".length);
  res.writeHead(200, { "content-type": json ? "application/json" : "application/proto", "content-length": String(whole.byteLength) });
  res.write(part, () => cut(res));
}

function send(res, status, headers, body) {
  const b = Buffer.from(body, typeof body === "string" ? "latin1" : undefined);
  res.writeHead(status, { ...headers, "content-length": String(b.byteLength) });
  res.end(b);
}

/**
 * A real HTTP/1.1 or h2c server answering GetResult by the call id in the
 * request (ANSWERS), and holding "sc-hold" unanswered: `nextHold` resolves
 * when the next one arrives, with `closed`, a promise of its end.
 */
async function server(version) {
  let arrived;
  const s = {
    held: [],
    nextHold: new Promise((r) => (arrived = r)),
  };
  const handler = (req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("latin1");
      const json = String(req.headers["content-type"]).includes("json");
      if (body.includes("sc-hold")) {
        const closed = new Promise((r) => res.on("close", r));
        s.held.push(res);
        const a = arrived;
        s.nextHold = new Promise((r) => (arrived = r));
        a({ closed }); // not the promise itself: resolving with it would wait for it
        return;
      }
      const name = Object.keys(ANSWERS).find((k) => body.includes(k));
      if (name) ANSWERS[name](res, json);
      else send(res, 404, { "content-type": "text/plain" }, "no such scenario");
    });
  };
  const srv = version === "2" ? http2.createServer(handler) : http.createServer(handler);
  const sessions = new Set();
  srv.on("session", (sess) => {
    sessions.add(sess);
    sess.on("close", () => sessions.delete(sess));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  s.url = `http://127.0.0.1:${srv.address().port}`;
  s.close = async () => {
    for (const res of s.held) (res.stream ?? res).destroy();
    for (const sess of sessions) sess.destroy();
    srv.closeAllConnections?.();
    await new Promise((r) => srv.close(r));
  };
  return s;
}

const codeName = (c) => Code[c].replace(/[A-Z]/g, (x, i) => (i ? "_" : "") + x.toLowerCase());

describe("the unary path against servers of the test's own", () => {
  for (const config of CONFIGS) {
    describe(label(config), () => {
      let s, client;
      before(async () => {
        s = await server(config.httpVersion);
        client = new tw.Client(s.url, { ...config, maxMessageBytes: 1024, timeout: 30 });
      });
      after(async () => {
        client.close();
        await s.close();
      });

      test("each answer fails as it does through connect-es", async () => {
        const ids = Object.keys(ANSWERS).filter((k) => k !== "sc-ok" && (CUT_OFF[k] ?? config.httpVersion) === config.httpVersion);
        for (const id of ids) {
          const mine = await client.getResult(id).then(() => assert.fail(`${id}: answered`), (e) => e);
          const theirs = await client.rpc.getResult({ callId: id }, { timeoutMs: 30_000 }).then(() => assert.fail(`${id}: answered`), (e) => e);
          assert.ok(mine instanceof tw.TransportError, `${id}: ${mine}`);
          assert.ok(theirs instanceof ConnectError, `${id}: ${theirs}`);
          assert.deepEqual([mine.code, mine.rawMessage, mine.details], [codeName(theirs.code), theirs.rawMessage, theirs.details], id);
        }
      });

      test("Connect's error JSON, bare HTTP errors, the limit", async () => {
        const details = await client.getResult("sc-details").catch((e) => e);
        assert.equal(details.code, "resource_exhausted");
        assert.equal(details.rawMessage, "slow down");
        assert.deepEqual(details.details, [{ type: "google.rpc.RetryInfo", value: new Uint8Array([0x0a, 0x02, 0x08, 0x05]), debug: { retryDelay: "5s" } }]);
        const cases = {
          "sc-unknown-code": ["unknown", "odd"],
          "sc-no-message": ["permission_denied", ""],
          "sc-bad-detail": ["internal", "HTTP 400"],
          "sc-not-json": ["unavailable", "HTTP 502"],
          "sc-plain-503": ["unavailable", "HTTP 503"],
          "sc-plain-401": ["unauthenticated", "HTTP 401"],
          "sc-proto-404": ["unimplemented", "HTTP 404"],
          "sc-html-200": ["unknown", "unsupported content type text/html"],
          "sc-stream-200": ["internal", "unsupported content type application/connect+json"],
          "sc-gzip-200": ["internal", 'unsupported response encoding "gzip"'],
          "sc-big-length": ["resource_exhausted", "message size 2048 is larger than configured readMaxBytes 1024"],
          "sc-big-chunked": ["resource_exhausted", "message size is larger than configured readMaxBytes 1024"],
        };
        for (const [id, want] of Object.entries(cases)) {
          const err = await client.getResult(id).catch((e) => e);
          assert.ok(err instanceof tw.TransportError, `${id}: ${err}`);
          assert.deepEqual([err.code, err.rawMessage], want, id);
        }
      });

      test("an answer cut off mid-body is refused", async () => {
        const want = config.httpVersion === "2"
          ? { "sc-cut-cancel": ["canceled", /^http\/2 stream closed with error code CANCEL \(0x8\)$/],
            "sc-cut-no-error": ["invalid_argument", /^protocol error: promised \d+ bytes, received \d+$/],
            "sc-cut-session": ["canceled", /^http\/2 stream closed with error code CANCEL \(0x8\)$/] }
          : { "sc-cut-socket": ["aborted", /^aborted$/] };
        for (const [id, [code, message]] of Object.entries(want)) {
          const err = await client.getResult(id).then((r) => assert.fail(`${id}: answered ${JSON.stringify(r)}`), (e) => e);
          assert.ok(err instanceof tw.TransportError, `${id}: ${err}`);
          assert.equal(err.code, code, id);
          assert.match(err.rawMessage, message, id);
        }
        assert.equal((await client.getResult("sc-ok")).callId, "sc-ok", "the client goes on");
      });

      test("an answer with a field this version does not know", async () => {
        const res = await client.getResult("sc-ok");
        assert.equal(res.callId, "sc-ok");
        assert.equal(res.tool, "echo");
      });

      test("a deadline", async () => {
        const held = s.nextHold;
        const err = await client.getResult("sc-hold", { timeout: 0.2 }).catch((e) => e);
        assert.ok(err instanceof tw.TransportError, String(err));
        assert.deepEqual([err.code, err.rawMessage], ["deadline_exceeded", "the operation timed out"]);
        await (await held).closed; // the server saw the request end
      });

      test("an abort mid-request ends the request", async () => {
        const ac = new AbortController();
        const held = s.nextHold;
        const done = client.getResult("sc-hold", { signal: ac.signal });
        const { closed } = await held;
        ac.abort(new Error("no longer wanted"));
        await assert.rejects(done, /no longer wanted/);
        await closed; // the server saw the request end
        assert.equal((await client.getResult("sc-ok")).callId, "sc-ok", "the client goes on");
      });
    });
  }
});

/** Resolves once the hold tool runs on the worker (its "holding" progress). */
async function runningOnWorker(client, callId) {
  for await (const ev of client.watch(callId)) {
    if (ev.type === "PROGRESS" && ev.message === "holding") return;
  }
  throw new Error(`call ${callId} finished before it was seen running`);
}
