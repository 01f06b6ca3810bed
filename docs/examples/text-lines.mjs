// The program of docs/examples/sandbox-node.yaml (docs/other-languages.md):
// a tool in JavaScript run by the sandbox executor once per call, the
// call's text on stdin, its answer as JSON on stdout. It exits 3 on a text
// it refuses, which the spec maps to VALIDATION.
let text = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) text += chunk;
if (text.includes("\0")) {
  console.error("the text holds a NUL character");
  process.exit(3);
}
const lines = text === "" ? [] : text.replace(/\n$/, "").split("\n");
console.log(JSON.stringify({ lines: lines.length, non_blank: lines.filter((l) => l.trim() !== "").length }));
