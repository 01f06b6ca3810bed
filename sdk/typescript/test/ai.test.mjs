// The AI SDK adapter (@toolwire/client/ai) driven by the SDK's own
// tool-execution path: generateText with a scripted model (MockLanguageModelV4
// from ai/test) whose tool calls are real calls on the stack.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { generateText } from "ai";
import { MockLanguageModelV4 } from "ai/test";

import { Client } from "../dist/index.js";
import { aiTools } from "../dist/adapters/ai.js";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { example } from "./examples.mjs";
import { API_KEY, APPROVER_KEY, URL, needsStack, unique } from "./stack.mjs";

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that asks for `calls` first, then answers with the tool messages it was given. */
function scriptedModel(calls) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const toolMessages = prompt.filter((m) => m.role === "tool");
      if (toolMessages.length === 0) {
        return {
          content: calls.map(([toolName, input], i) => ({ type: "tool-call", toolCallId: `call-${i}`, toolName, input })),
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      return { content: [{ type: "text", text: JSON.stringify(toolMessages) }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}

describe("AI SDK adapter", { skip: needsStack }, () => {
  let client;
  before(() => {
    client = new Client(URL, { apiKey: API_KEY });
  });
  after(() => client.close());

  test("tools run through toolwire; a deny and an ask meet the SDK's approval flow", async () => {
    const session = unique("ai");
    const { tools, toolApproval } = await aiTools(client, { session });
    assert.ok(tools.echo && tools.deploy && tools.steps);
    const model = scriptedModel([["echo", '{"text":"hi there"}'], ["echo", '{"text":"secret"}'], ["deploy", '{"name":"ai-once"}'], ["echo", '{"text":7}']]);
    const messages = [{ role: "user", content: "go" }];
    const first = await generateText({ model, tools, toolApproval, messages });

    const parts = (type) => first.content.filter((c) => c.type === type);
    // Run through toolwire: a result, and a tool error for the model.
    assert.deepEqual(parts("tool-result").map((c) => [c.toolCallId, c.output]), [["call-0", { text: "hi there" }]]);
    const [invalid] = parts("tool-error");
    assert.equal(invalid.toolCallId, "call-3");
    assert.equal(invalid.error.type, "VALIDATION");
    // The policy's deny is the SDK's denial, with the rule's reason.
    const denied = parts("tool-approval-response").find((c) => c.toolCall.toolCallId === "call-1");
    assert.equal(denied.approved, false);
    assert.match(denied.reason, /secrets are never echoed/);
    // The ask rule is the SDK's approval request; nothing ran yet.
    const [ask] = parts("tool-approval-request").filter((c) => c.toolCall.toolCallId === "call-2");
    assert.match(ask.reason, /deploys need a human/);
    assert.equal(parts("tool-approval-request").length, 2, "the deny's request is answered automatically");

    // The application's user approves: the parked call runs, once.
    messages.push(...first.response.messages, {
      role: "tool", content: [{ type: "tool-approval-response", approvalId: ask.approvalId, approved: true }],
    });
    const second = await generateText({ model, tools, toolApproval, messages });
    // The model reads every tool call's answer, the approved deploy's among them.
    const read = JSON.parse(second.text).flatMap((m) => m.content);
    const answer = (id) => read.find((c) => c.toolCallId === id)?.output;
    assert.deepEqual(answer("call-2"), { type: "text", value: "deployed ai-once" });
    assert.deepEqual(answer("call-0"), { type: "json", value: { text: "hi there" } });
    assert.equal(answer("call-1").type, "execution-denied");
    assert.match(answer("call-3").value, /VALIDATION/);
  });

  test("a rejection cancels the parked call; the same tool call decided again by new tools parks no second call", async () => {
    const session = unique("ai-reject");
    const ids = [];
    const onCall = (toolCallId, id) => ids.push([toolCallId, id]);
    const first = await aiTools(client, { session, nameGlob: "deploy", onCall });
    const model = scriptedModel([["deploy", '{"name":"ai-rejected"}']]);
    const messages = [{ role: "user", content: "go" }];
    const asked = await generateText({ model, tools: first.tools, toolApproval: first.toolApproval, messages });
    const [ask] = asked.content.filter((c) => c.type === "tool-approval-request");
    assert.equal(ids.length, 1, "onCall is told the parked call's id");
    const [[toolCallId, parked]] = ids;
    assert.equal(toolCallId, ask.toolCall.toolCallId);
    // New tools (a new request of the application) decide the same tool call again: the same parked call.
    const again = await aiTools(client, { session, nameGlob: "deploy", onCall });
    const d = await again.toolApproval({ toolCall: ask.toolCall });
    assert.equal(d.type, "user-approval");
    assert.deepEqual(ids.map(([, id]) => id), [parked, parked], "no second parked call");
    // The user rejects: the parked call is cancelled, so no toolwire approver can run it.
    messages.push(...asked.response.messages, {
      role: "tool", content: [{ type: "tool-approval-response", approvalId: ask.approvalId, approved: false }],
    });
    await first.reject(messages);
    const approver = new Client(URL, { apiKey: APPROVER_KEY });
    try {
      const a = await approver.getApproval(parked);
      assert.notEqual(a.state, "PENDING");
      assert.ok(!(await approver.listApprovals("pending")).some((p) => p.id === parked));
    } finally {
      approver.close();
    }
    const res = await client.getResult(parked, { wait: 30 });
    assert.ok(!res.ok, "the rejected call did not run");
  });

  test("approvals: false submits nothing before execute", async () => {
    const ids = [];
    const { tools, toolApproval } = await aiTools(client, { session: unique("ai-noapprovals"), nameGlob: "echo", approvals: false, onCall: (_t, id) => ids.push(id) });
    assert.equal(await toolApproval({ toolCall: { toolCallId: "x", toolName: "echo", input: { text: "hi" } } }), undefined);
    assert.deepEqual(ids, []);
    const out = await tools.echo.execute({ text: "hi" }, { toolCallId: "x", messages: [] });
    assert.deepEqual(out, { text: "hi" });
    assert.equal(ids.length, 1);
  });

  test("an abort of generateText cancels the tool call on the worker", async () => {
    const ac = new AbortController();
    let callId = "";
    const onCall = (toolCallId, id) => {
      callId = id;
      runningOnWorker(client, id).then(() => ac.abort(), (e) => ac.abort(e));
    };
    const { tools } = await aiTools(client, { nameGlob: "hold", onCall });
    assert.deepEqual(Object.keys(tools), ["hold"]);
    const model = new MockLanguageModelV4({
      doGenerate: async () => ({
        content: [{ type: "tool-call", toolCallId: "h", toolName: "hold", input: "{}" }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
      }),
    });
    // The SDK ends the run: a rejection, or (ai 7.0) the tool call's error.
    const r = await generateText({ model, tools, prompt: "hold", abortSignal: ac.signal }).catch((e) => e);
    assert.ok(r instanceof Error || r.steps.at(-1).content.some((c) => c.type === "tool-error" && c.toolCallId === "h"), "the run went on");
    assert.ok(callId);
    const res = await client.getResult(callId, { wait: 30 });
    assert.equal(res.error?.type, "CANCELLED", String(res.error));
    assert.equal(res.meta.source, "worker");
    assert.equal(res.meta.cancelReason, "aborted by the caller");
  });
});

describe("the README's AI SDK example", { skip: needsStack }, () => {
  test("runs as written", async () => {
    // The example's imports stay at the top of a module; its statements
    // become a function of what it takes from around it (tw, model, messages).
    const lines = (await example("ai-sdk")).trimEnd().split("\n");
    const imports = lines.filter((l) => l.startsWith("import "));
    const body = lines.filter((l) => !l.startsWith("import ")).join("\n");
    const here = dirname(fileURLToPath(import.meta.url));
    const dir = await mkdtemp(join(here, "readme-"));
    const tw = new Client(URL, { apiKey: API_KEY });
    try {
      const file = join(dir, "ai-sdk.mjs");
      await writeFile(file, `${imports.join("\n")}\nexport default async function (tw, model, messages) {\n${body}\nreturn result;\n}\n`);
      const run = (await import(pathToFileURL(file).href)).default;
      const result = await run(tw, scriptedModel([["echo", '{"text":"from the README"}']]), [{ role: "user", content: "go" }]);
      assert.deepEqual(result.content.filter((c) => c.type === "tool-result").map((c) => c.output), [{ text: "from the README" }]);
    } finally {
      tw.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** Resolves once the hold tool runs on the worker (its "holding" progress). */
async function runningOnWorker(client, callId) {
  for await (const ev of client.watch(callId)) {
    if (ev.type === "PROGRESS" && ev.message === "holding") return;
  }
  throw new Error(`call ${callId} finished before it was seen running`);
}
