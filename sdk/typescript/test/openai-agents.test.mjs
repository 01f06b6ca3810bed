// The OpenAI Agents SDK adapter (@toolwire/client/openai-agents) driven by
// the SDK's own tool-execution path: run() of an Agent whose model is
// scripted (a Model answering function calls first, then the results it
// was given) and whose tool calls are real calls on the stack.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Agent, RunState, run, Usage } from "@openai/agents";

import { Client } from "../dist/index.js";
import { agentsTools } from "../dist/adapters/openai-agents.js";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { example } from "./examples.mjs";
import { API_KEY, APPROVER_KEY, URL, needsStack, unique } from "./stack.mjs";

/** A model that asks for `calls` first, then answers with the function call results it was given. */
function scriptedModel(calls) {
  return {
    async getResponse(request) {
      const input = Array.isArray(request.input) ? request.input : [];
      const results = input.filter((i) => i.type === "function_call_result");
      if (results.length === 0) {
        return {
          usage: new Usage(),
          output: calls.map(([name, args], i) => ({ type: "function_call", callId: `call-${i}`, name, arguments: args, status: "completed" })),
        };
      }
      const text = JSON.stringify(Object.fromEntries(results.map((r) => [r.callId, r.output])));
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }] };
    },
    async *getStreamedResponse() {
      throw new Error("not streamed");
    },
  };
}

describe("OpenAI Agents SDK adapter", { skip: needsStack }, () => {
  let client;
  before(() => {
    client = new Client(URL, { apiKey: API_KEY });
  });
  after(() => client.close());

  test("tools run through toolwire; an ask interrupts the run and an approval runs the parked call", async () => {
    const tools = await agentsTools(client, { session: unique("agents") });
    assert.ok(["echo", "deploy", "steps"].every((n) => tools.some((t) => t.name === n)));
    const model = scriptedModel([["echo", '{"text":"hi there"}'], ["echo", '{"text":"secret"}'], ["deploy", '{"name":"agents-once"}'], ["echo", '{"text":7}']]);
    const agent = new Agent({ name: "ops", instructions: "use the tools", model, tools });
    const first = await run(agent, "go");
    assert.deepEqual(first.interruptions.map((i) => i.rawItem.name), ["deploy"], "the ask rule interrupts the run");
    first.state.approve(first.interruptions[0]);
    const second = await run(agent, first.state);
    const outputs = JSON.parse(second.finalOutput);
    const text = (v) => (typeof v === "string" ? v : v?.text ?? JSON.stringify(v));
    assert.match(text(outputs["call-0"]), /hi there/);
    assert.match(text(outputs["call-1"]), /secrets are never echoed/);
    assert.match(text(outputs["call-2"]), /deployed agents-once/);
    assert.match(text(outputs["call-3"]), /VALIDATION/);
  });

  test("a rejected approval cancels the parked call", async () => {
    const session = unique("agents-reject");
    const ids = [];
    const tools = await agentsTools(client, { session, nameGlob: "deploy", onCall: (_t, id) => ids.push(id) });
    const agent = new Agent({ name: "ops", model: scriptedModel([["deploy", '{"name":"agents-rejected"}']]), tools });
    const first = await run(agent, "go");
    assert.equal(first.interruptions.length, 1);
    assert.equal(ids.length, 1, "onCall is told the parked call's id");
    first.state.reject(first.interruptions[0]);
    await tools.reject(first.interruptions[0]);
    const second = await run(agent, first.state);
    const outputs = JSON.parse(second.finalOutput);
    assert.doesNotMatch(JSON.stringify(outputs["call-0"]), /deployed/);
    const approver = new Client(URL, { apiKey: APPROVER_KEY });
    try {
      assert.notEqual((await approver.getApproval(ids[0])).state, "PENDING", "no toolwire approver can run it now");
    } finally {
      approver.close();
    }
    assert.ok(!(await client.getResult(ids[0], { wait: 30 })).ok);
  });

  test("a run resumed from its serialized state with new tools parks no second call", async () => {
    const session = unique("agents-resume");
    const ids = [];
    const onCall = (_t, id) => ids.push(id);
    const model = scriptedModel([["deploy", '{"name":"agents-resumed"}']]);
    const first = await run(new Agent({ name: "ops", model, tools: await agentsTools(client, { session, nameGlob: "deploy", onCall }) }), "go");
    assert.equal(first.interruptions.length, 1);
    const saved = first.state.toString();
    // Another process: new tools, the state read back, the user's approval.
    const agent = new Agent({ name: "ops", model, tools: await agentsTools(client, { session, nameGlob: "deploy", onCall }) });
    const state = await RunState.fromString(agent, saved);
    state.approve(state.getInterruptions()[0]);
    const second = await run(agent, state);
    // The new tools hold no approval token (the dispatcher gives it with the first answer only):
    // the parked call waits for a toolwire approver, and no other was parked.
    assert.match(JSON.stringify(JSON.parse(second.finalOutput)["call-0"]), /waits for an approver/);
    assert.equal(new Set(ids).size, 1, `one parked call: ${ids}`);
    const approver = new Client(URL, { apiKey: APPROVER_KEY });
    try {
      assert.deepEqual((await approver.listApprovals("pending", { session })).map((a) => a.id), [ids[0]]);
      await approver.approve(ids[0], { reason: "resumed" });
    } finally {
      approver.close();
    }
    const res = await client.getResult(ids[0], { wait: 30 });
    assert.equal(res.text, "deployed agents-resumed");
  });

  test("approvals: false asks nothing before execute", async () => {
    const ids = [];
    const tools = await agentsTools(client, { session: unique("agents-noapprovals"), nameGlob: "deploy", approvals: false, onCall: (_t, id) => ids.push(id) });
    const agent = new Agent({ name: "ops", model: scriptedModel([["deploy", '{"name":"agents-unasked"}']]), tools });
    const r = await run(agent, "go");
    assert.equal(r.interruptions.length, 0);
    assert.match(JSON.stringify(JSON.parse(r.finalOutput)["call-0"]), /waits for an approver/);
    assert.equal(ids.length, 1);
    await client.cancel(ids[0], "the test is over");
  });
});

describe("the README's Agents SDK example", { skip: needsStack }, () => {
  test("runs as written", async () => {
    // The example's imports stay at the top of a module; its statements
    // become a function of what it takes from around it (tw, model).
    const lines = (await example("openai-agents")).trimEnd().split("\n");
    const imports = lines.filter((l) => l.startsWith("import "));
    const body = lines.filter((l) => !l.startsWith("import ")).join("\n");
    const dir = await mkdtemp(join(dirname(fileURLToPath(import.meta.url)), "readme-"));
    const tw = new Client(URL, { apiKey: API_KEY });
    try {
      const file = join(dir, "openai-agents.mjs");
      await writeFile(file, `${imports.join("\n")}\nexport default async function (tw, model) {\n${body}\nreturn result;\n}\n`);
      const runExample = (await import(pathToFileURL(file).href)).default;
      const result = await runExample(tw, scriptedModel([["deploy", '{"name":"readme"}']]));
      assert.deepEqual(JSON.parse(result.finalOutput)["call-0"], { type: "text", text: "deployed readme" });
    } finally {
      tw.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
