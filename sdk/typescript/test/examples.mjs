// The examples of README.md and docs/sdk.md, as the tests read them.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const README = join(here, "..", "README.md");
export const SDK_DOC = join(here, "..", "..", "..", "docs", "sdk.md");

/** The js block after the file's `<!-- readme-test: name -->`. */
export async function example(name, path = README) {
  const text = await readFile(path, "utf8");
  const m = text.match(new RegExp(`<!-- readme-test: ${name} -->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``));
  assert.ok(m, `${path} has no example ${name}`);
  return m[1];
}
