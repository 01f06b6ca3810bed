// The client against a real dispatcher and worker: the scenarios of issue
// 34 (call, validation error, policy deny, ask -> approve -> run, token
// redeem, watch with progress, cancel reaching the worker, intents applied
// to a session, a rate limit's retryAfter), as the Python client's tests.
import assert from "node:assert/strict";
import diagnosticsChannel from "node:diagnostics_channel";
import { after, before, describe, test } from "node:test";

import * as tw from "../dist/index.js";
import { API_KEY, APPROVER_KEY, URL, needsStack, unique } from "./stack.mjs";

const UNKNOWN = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

describe("client scenarios", { skip: needsStack }, () => {
  let client, approver;
  before(() => {
    client = new tw.Client(URL, { apiKey: API_KEY });
    approver = new tw.Client(URL, { apiKey: APPROVER_KEY });
  });
  after(() => {
    client.close();
    approver.close();
  });

  test("call", async () => {
    const res = await client.call("echo", { text: "hello" });
    assert.equal(res.ok, true);
    assert.equal(res.error, undefined);
    assert.equal(res.text, "hello");
    assert.deepEqual(res.structured, { text: "hello" });
    assert.equal(res.tool, "echo");
    assert.equal(res.meta.source, "worker");
    assert.ok(res.meta.specVersion);
    assert.equal(res.throwIfError(), res);
  });

  test("arguments as JSON text reach the tool byte for byte", async () => {
    const res = await client.call("echo", '{"text": "12345678901234567890123"}');
    assert.equal(res.text, "12345678901234567890123");
  });

  test("the JSON protocol answers as binary protobuf does", async () => {
    const json = new tw.Client(URL, { apiKey: API_KEY, json: true });
    try {
      const res = await json.call("echo", { text: "over JSON" });
      assert.equal(res.text, "over JSON");
      const bad = await json.call("echo", { text: 7 });
      assert.ok(bad.error instanceof tw.ValidationError);
    } finally {
      json.close();
    }
  });

  test("over HTTP/2, calls, watches and an abort share one connection; after close a new one opens", async () => {
    // node:http reports every HTTP/1.1 request it starts: none may be the
    // HTTP/2 client's (the default client's call shows the count works).
    let http1 = 0;
    const counted = () => http1++;
    diagnosticsChannel.subscribe("http.client.request.start", counted);
    try {
      await client.call("echo", { text: "over HTTP/1.1" });
      assert.equal(http1, 1);
      await overHTTP2();
    } finally {
      diagnosticsChannel.unsubscribe("http.client.request.start", counted);
    }
    assert.equal(http1, 1, "the HTTP/2 client made HTTP/1.1 requests");
  });

  async function overHTTP2() {
    for (const json of [false, true]) {
      const h2 = new tw.Client(URL, { apiKey: API_KEY, httpVersion: "2", json });
      try {
        const texts = Array.from({ length: 16 }, (_, i) => `h2 ${json} ${i}`);
        const many = await Promise.all(texts.map((text) => h2.call("echo", { text })));
        assert.deepEqual(many.map((r) => r.text), texts);
        const bad = await h2.call("echo", { text: 7 });
        assert.ok(bad.error instanceof tw.ValidationError);
        const sub = await h2.submit("steps", { steps: 2 });
        const events = [];
        for await (const ev of h2.watch(sub.callId)) events.push(ev);
        assert.equal(events.at(-1).result.text, "did 2 steps");
        if (!json) {
          const ac = new AbortController();
          let callId = "";
          const done = h2.call("hold", {}, {
            signal: ac.signal,
            onSubmitted: (id) => {
              callId = id;
              runningOnWorker(h2, id).then(() => ac.abort(), (e) => ac.abort(e));
            },
          });
          await assert.rejects(done, (e) => e.name === "AbortError");
          const res = await h2.getResult(callId, { wait: 30 });
          assert.ok(res.error instanceof tw.CallCancelledError, String(res.error));
        }
        h2.close();
        assert.equal((await h2.call("echo", { text: "again" })).text, "again");
      } finally {
        h2.close();
      }
    }
  }

  test("validation error", async () => {
    const res = await client.call("echo", { text: 7 });
    assert.equal(res.ok, false);
    assert.ok(res.error instanceof tw.ValidationError);
    assert.ok(res.error instanceof tw.ToolError);
    assert.equal(res.error.type, "VALIDATION");
    assert.equal(res.error.retryable, false);
    assert.equal(res.error.sideEffects, "NONE");
    assert.equal(res.error.retryAfter, undefined);
    assert.ok(res.error.violations.some((v) => v.field === "/text"), JSON.stringify(res.error.violations));
    assert.equal(res.error.callId, res.callId);
    assert.throws(() => res.throwIfError(), tw.ValidationError);
  });

  test("an unknown tool is NOT_FOUND", async () => {
    const res = await client.call("no_such_tool", {});
    assert.ok(res.error instanceof tw.NotFoundError);
  });

  test("policy deny", async () => {
    const res = await client.call("echo", { text: "secret plans" });
    assert.ok(res.error instanceof tw.PermissionDeniedError);
    assert.match(res.error.rawMessage, /secrets are never echoed/);
    assert.equal(res.error.retryable, false);
    assert.equal(res.error.sideEffects, "NONE");
  });

  test("ask, approve, run", async () => {
    const session = unique("ask");
    const parked = await client.call("deploy", { name: "billing" }, { session }).then(
      () => assert.fail("a parked call is not an answer"), (e) => e);
    assert.ok(parked instanceof tw.ApprovalRequiredError, String(parked));
    assert.ok(parked instanceof tw.ConfirmationRequiredError);
    assert.equal(parked.approvalId, parked.callId);
    assert.ok(parked.expiresAt instanceof Date);
    assert.match(parked.reason, /deploys need a human/);

    const pending = await approver.listApprovals("pending", { session });
    assert.deepEqual(pending.map((a) => a.id), [parked.approvalId]);
    assert.equal(pending[0].tool, "deploy");
    assert.deepEqual(pending[0].arguments, { name: "billing" });
    const done = await approver.approve(parked.approvalId, { reason: "looks fine" });
    assert.equal(done.approval.state, "APPROVED");
    assert.equal(done.grant, undefined);

    const res = await client.getResult(parked.callId, { wait: 30 });
    assert.equal(res.ok, true, String(res.error));
    assert.equal(res.text, "deployed billing");
  });

  test("ask, deny", async () => {
    const sub = await client.submit("deploy", { name: "payroll" }, { session: unique("deny") });
    assert.ok(sub.approval);
    assert.equal(sub.state, "AWAITING_APPROVAL");
    const denied = await approver.deny(sub.approval.approvalId, "not on a Friday");
    assert.equal(denied.state, "DENIED");
    const res = await client.getResult(sub.callId, { wait: 30 });
    assert.ok(res.error instanceof tw.PermissionDeniedError);
    assert.match(res.error.rawMessage, /not on a Friday/);
  });

  test("token redeem", async () => {
    const session = unique("token");
    const parked = await client.call("deploy", { name: "search" }, { session }).catch((e) => e);
    assert.ok(parked instanceof tw.ApprovalRequiredError, String(parked));
    assert.ok(parked.token, "the agent's key has the confirm scope and the dispatcher token keys");
    // The orchestrator's own user confirmed: the same call, with the token.
    const res = await client.call("deploy", '{ "name" : "search" }', { session, approvalToken: parked.token });
    assert.equal(res.ok, true, String(res.error));
    assert.equal(res.text, "deployed search");
    assert.equal(res.callId, parked.callId, "it runs as the parked call");
    // Used once.
    const again = await client.call("deploy", { name: "search" }, { session, approvalToken: parked.token });
    assert.ok(again.error instanceof tw.ConfirmationRequiredError);
  });

  test("watch with progress, resumed", async () => {
    const sub = await client.submit("steps", { steps: 3 });
    const events = [];
    for await (const ev of client.watch(sub.callId)) events.push(ev);
    const progress = events.filter((e) => e.type === "PROGRESS");
    assert.deepEqual(progress.map((e) => e.message), ["step 1 of 3", "step 2 of 3", "step 3 of 3"]);
    assert.deepEqual(progress.map((e) => e.percent), [33, 66, 100]);
    assert.ok(events.some((e) => e.type === "STARTED"));
    const last = events.at(-1);
    assert.equal(last.type, "FINISHED");
    assert.equal(last.terminal, true);
    assert.equal(last.result.text, "did 3 steps");

    // Resumed after the events already seen: only the rest comes.
    const rest = [];
    for await (const ev of client.watch(sub.callId, { after: events.slice(0, -2) })) rest.push(ev);
    assert.deepEqual(rest.map((e) => [e.type, e.message]), [["PROGRESS", "step 3 of 3"], ["FINISHED", ""]]);
  });

  test("watch of a rejected call", async () => {
    const sub = await client.submit("echo", { text: 7 });
    assert.ok(sub.result.error instanceof tw.ValidationError);
    const events = [];
    for await (const ev of client.watch(sub.callId)) events.push(ev);
    assert.equal(events.at(-1).type, "REJECTED");
    assert.ok(events.at(-1).result.error instanceof tw.ValidationError);
  });

  test("cancel reaches the worker", async () => {
    const sub = await client.submit("hold", {});
    await runningOnWorker(client, sub.callId);
    assert.equal(await client.cancel(sub.callId, "changed my mind"), "REQUESTED");
    const res = await client.getResult(sub.callId, { wait: 30 });
    assert.ok(res.error instanceof tw.CallCancelledError, String(res.error));
    assert.equal(res.meta.source, "worker");
    assert.equal(res.meta.cancelReason, "changed my mind");
    assert.equal(await client.cancel(sub.callId), "ALREADY_FINISHED");
  });

  test("an AbortSignal cancels the call on the worker", async () => {
    const ac = new AbortController();
    let callId = "";
    const done = client.call("hold", {}, {
      signal: ac.signal,
      onSubmitted: (id) => {
        callId = id;
        runningOnWorker(client, id).then(() => ac.abort(), (e) => ac.abort(e));
      },
    });
    await assert.rejects(done, (e) => e.name === "AbortError");
    assert.ok(callId);
    const res = await client.getResult(callId, { wait: 30 });
    assert.ok(res.error instanceof tw.CallCancelledError, String(res.error));
    assert.equal(res.meta.source, "worker");
    assert.equal(res.meta.cancelReason, "aborted by the caller");
  });

  test("an aborted request rejects with the signal's reason", async () => {
    const ac = new AbortController();
    ac.abort(new Error("not any more"));
    await assert.rejects(client.listTools("", { signal: ac.signal }), /not any more/);
    const watching = (async () => {
      for await (const ev of client.watch(UNKNOWN, { signal: ac.signal })) void ev;
    })();
    await assert.rejects(watching, /not any more/);
  });

  test("pending, then cancelled before it ends", async () => {
    const pending = await client.call("sleep", { duration: "1h" }, { wait: 0.2 }).catch((e) => e);
    assert.ok(pending instanceof tw.PendingError, String(pending));
    assert.equal(await client.cancel(pending.callId), "REQUESTED");
    const res = await client.getResult(pending.callId, { wait: 30 });
    assert.ok(res.error instanceof tw.CallCancelledError);
  });

  test("intents applied to a session", async () => {
    const session = unique("intents");
    const res = await client.call("remember", { key: "color", value: "blue" }, { session, applyIntents: true });
    assert.equal(res.ok, true, String(res.error));
    assert.deepEqual(res.intents.map((i) => i.type), ["SET_STATE"]);
    assert.deepEqual(res.intents[0].payload, { key: "color", value: "blue" });
    assert.deepEqual(res.session.state, { color: "blue" });
    assert.equal(res.applyError, "");
    const again = await client.applyIntents(res.callId);
    assert.deepEqual([again.applied, again.skipped], [0, 1], "each intent is applied once");
    const s = await client.getSession(session);
    assert.deepEqual(s.state, { color: "blue" });
    assert.ok(s.revision >= 1n);
  });

  test("intents applied later", async () => {
    const session = unique("later");
    const res = await client.call("remember", { key: "n", value: 42 }, { session });
    assert.equal(res.session, undefined);
    const applied = await client.applyIntents(res.callId);
    assert.equal(applied.applied, 1);
    assert.deepEqual(applied.session.state, { n: 42 });
  });

  test("intents applied by an abortable call", async () => {
    const session = unique("abortable");
    const res = await client.call("remember", { key: "k", value: "v" }, { session, applyIntents: true, signal: new AbortController().signal });
    assert.equal(res.ok, true, String(res.error));
    assert.deepEqual(res.session.state, { k: "v" });
  });

  test("a rate limit's retryAfter", async () => {
    const first = await client.call("ping", {});
    assert.equal(first.ok, true, String(first.error));
    const second = await client.call("ping", {});
    assert.ok(second.error instanceof tw.RateLimitError, String(second.error));
    assert.equal(second.error.retryable, true);
    assert.ok(second.error.retryAfter > 60, `one ping an hour: the next is due in about an hour, not ${second.error.retryAfter}s`);
    assert.ok(second.error.retryAfter <= 3600);
    assert.match(second.error.rawMessage, /ping-rate/);
    const usage = await client.usage();
    const limit = usage.limits.find((u) => u.limit === "ping-rate");
    assert.deepEqual([limit.rateCount, limit.ratePer, limit.key], [1, 3600, "agent"]);
    assert.ok(usage.policyVersion);
  });

  test("tools and exports", async () => {
    const names = (await client.listTools()).map((t) => t.name);
    for (const name of ["echo", "sleep", "steps", "hold", "deploy", "ping", "remember"]) assert.ok(names.includes(name), name);
    const echo = await client.getTool("echo");
    assert.equal(echo.inputSchema.properties.text.type, "string");
    assert.ok(echo.version);
    assert.equal(echo.executor, "NATIVE");
    assert.deepEqual((await client.listTools("ec*")).map((t) => t.name), ["echo"]);
    const openai = await client.exportTools("openai", "echo");
    assert.equal(openai[0].function.name, "echo");
    const anthropic = await client.exportTools("anthropic", "echo");
    assert.equal(anthropic[0].name, "echo");
    assert.ok("input_schema" in anthropic[0]);
  });

  test("tools per model", async () => {
    // The stack's policy offers the gpt family echo with text at most 16
    // characters, and not steps (internal/sdkstack).
    const model = "gpt-5.1";
    const names = (await client.listTools("", { model })).map((t) => t.name);
    assert.ok(names.includes("echo"), names.join());
    assert.ok(!names.includes("steps"), "the gpt toolset hides steps");
    assert.ok((await client.listTools()).some((t) => t.name === "steps"), "without a model: every tool");
    assert.equal((await client.getTool("echo", "", { model })).inputSchema.properties.text.maxLength, 16, "the variant");
    assert.equal((await client.getTool("echo")).inputSchema.properties.text.maxLength, undefined, "the registered schema");
    const hidden = await client.getTool("steps", "", { model }).catch((e) => e);
    assert.ok(hidden instanceof tw.TransportError, String(hidden));
    assert.equal(hidden.code, "not_found");
    const openai = await client.exportTools("openai", "echo", { model });
    assert.equal(openai[0].function.parameters.properties.text.maxLength, 16);

    const long = "x".repeat(17);
    const res = await client.call("echo", { text: long }, { model });
    assert.ok(res.error instanceof tw.ValidationError, String(res.error));
    assert.match(res.error.rawMessage, /toolset gpt/);
    assert.equal((await client.call("echo", { text: long })).text, long, "without a model: the tool's own schema");
    assert.equal((await client.call("echo", { text: "short" }, { model })).text, "short");
    const steps = await client.call("steps", { steps: 1 }, { model });
    assert.ok(steps.error instanceof tw.PermissionDeniedError, String(steps.error));
  });

  test("an unknown call", async () => {
    await assert.rejects(client.getResult(UNKNOWN), tw.UnknownCallError);
    await assert.rejects((async () => {
      for await (const ev of client.watch(UNKNOWN)) void ev;
    })(), tw.UnknownCallError);
    assert.equal(await client.cancel(UNKNOWN), "UNKNOWN_CALL");
  });

  test("a bad key is a transport error", async () => {
    const bad = new tw.Client(URL, { apiKey: "not-a-key" });
    try {
      const err = await bad.call("echo", { text: "x" }).catch((e) => e);
      assert.ok(err instanceof tw.TransportError, String(err));
      assert.equal(err.code, "unauthenticated");
    } finally {
      bad.close();
    }
  });

  test("approvals need the approve scope", async () => {
    const err = await client.listApprovals().catch((e) => e);
    assert.ok(err instanceof tw.TransportError, String(err));
    assert.equal(err.code, "permission_denied");
  });

  test("an unreachable dispatcher", async () => {
    const nowhere = new tw.Client("http://127.0.0.1:1", { timeout: 5 });
    try {
      const err = await nowhere.listTools().catch((e) => e);
      assert.ok(err instanceof tw.TransportError, String(err));
      assert.equal(err.code, "unavailable");
    } finally {
      nowhere.close();
    }
  });

  test("idempotency key", async () => {
    const idempotencyKey = unique("idem");
    const a = await client.call("echo", { text: "once" }, { idempotencyKey });
    const b = await client.submit("echo", { text: "once" }, { idempotencyKey });
    assert.equal(b.duplicate, true);
    assert.equal(a.callId, b.callId);
    const c = await client.call("echo", { text: "other" }, { idempotencyKey });
    assert.ok(c.error instanceof tw.ConflictError);
  });
});

describe("without a stack", () => {
  test("an API key a header cannot carry is refused, and not shown", () => {
    assert.throws(() => new tw.Client("http://127.0.0.1:8080", { apiKey: "tw_secret\n" }), (e) => {
      assert.ok(e instanceof TypeError);
      assert.doesNotMatch(e.message, /tw_secret/);
      return true;
    });
  });

  test("an HTTP version other than 1.1 or 2 is refused", () => {
    assert.throws(() => new tw.Client("http://127.0.0.1:8080", { httpVersion: "3" }), TypeError);
    assert.throws(() => new tw.Client("http://127.0.0.1:8080", { httpVersion: "__proto__" }), TypeError);
  });

  test("a base URL that is not http(s) is refused", () => {
    assert.throws(() => new tw.Client("ftp://example.com"), TypeError);
    assert.throws(() => new tw.Client("not a url"), TypeError);
  });

  test("arguments", () => {
    assert.equal(tw.encodeArgs({ a: 1 }), '{"a":1}');
    assert.equal(tw.encodeArgs('{"big": 12345678901234567890123}'), '{"big": 12345678901234567890123}');
    assert.equal(tw.encodeArgs(new TextEncoder().encode('{"a":"é"}')), '{"a":"é"}');
    assert.throws(() => tw.encodeArgs(new Uint8Array([0xff, 0xfe])), TypeError);
    assert.equal(tw.encodeArgs(undefined), undefined);
  });

  test("error classes by type", () => {
    assert.equal(tw.toolErrorClass("RATE_LIMIT"), tw.RateLimitError);
    assert.equal(tw.toolErrorClass("SOMETHING_NEW"), tw.ToolError);
    const e = new tw.RateLimitError({ message: "slow down", retryable: true, retryAfter: 1.5, tool: "ping" });
    assert.equal(e.type, "RATE_LIMIT");
    assert.equal(e.name, "RateLimitError");
    assert.equal(e.message, "toolwire: ping: RATE_LIMIT: slow down");
    assert.equal(e.retryAfter, 1.5);
  });
});

/** Resolves once the hold tool runs on the worker (its "holding" progress). */
async function runningOnWorker(client, callId) {
  for await (const ev of client.watch(callId)) {
    if (ev.type === "PROGRESS" && ev.message === "holding") return;
  }
  throw new Error(`call ${callId} finished before it was seen running`);
}
