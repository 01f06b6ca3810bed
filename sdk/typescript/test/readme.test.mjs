// The examples of README.md and docs/sdk.md, run against the real stack as
// written there: the first call, and the agent loop driven by a scripted
// model. Each is written to a module inside the package (so that its
// import of "@toolwire/client" resolves to this package) and imported.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { example, SDK_DOC } from "./examples.mjs";
import { needsStack, unique } from "./stack.mjs";

const here = dirname(fileURLToPath(import.meta.url));

describe("README examples", { skip: needsStack }, () => {
  let dir;
  before(async () => {
    dir = await mkdtemp(join(here, "readme-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("a first call in five lines", async () => {
    const code = await example("first-call");
    assert.ok(code.trim().split("\n").length <= 5, code);
    const file = join(dir, "first-call.mjs");
    await writeFile(file, code);
    const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 60_000 });
    assert.equal(stdout, "hello\n");
  });

  test("docs/sdk.md shows the same first call", async () => {
    assert.equal(await example("first-call", SDK_DOC), await example("first-call"));
  });

  test("docs/sdk.md: tools per model", async () => {
    const file = join(dir, "tools-per-model.mjs");
    await writeFile(file, await example("tools-per-model", SDK_DOC));
    const { stdout } = await promisify(execFile)(process.execPath, [file], { timeout: 60_000 });
    assert.equal(stdout, "true 16\nhello\n");
  });

  test("an agent loop", async () => {
    const file = join(dir, "agent-loop.mjs");
    await writeFile(file, await example("agent-loop"));
    const { runAgent, tw } = await import(pathToFileURL(file).href);
    const calls = [["echo", '{"text": "hi there"}'], ["echo", '{"text": "secret"}'], ["deploy", '{"name": "web"}'], ["echo", '{"text": 1}']];
    const seenTools = [];
    const model = async (messages, tools) => {
      seenTools.push(new Set(tools.map((t) => t.function.name)));
      if (messages.length === 1) {
        return {
          role: "assistant", content: null,
          tool_calls: calls.map(([name, args], i) => ({ id: `c${i}`, type: "function", function: { name, arguments: args } })),
        };
      }
      return { role: "assistant", content: JSON.stringify(messages.filter((m) => m.role === "tool").map((m) => m.content)) };
    };
    try {
      const answers = JSON.parse(await runAgent(model, [{ role: "user", content: "go" }], unique("agent"), AbortSignal.timeout(60_000)));
      assert.equal(answers[0], "hi there");
      assert.match(answers[1], /secrets are never echoed/);
      assert.match(answers[2], /needs a human's approval/);
      assert.match(answers[3], /VALIDATION/);
      assert.ok(seenTools[0].has("echo"));
    } finally {
      tw.close();
    }
  });
});
