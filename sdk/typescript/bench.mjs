#!/usr/bin/env node
// Calls per second of the TypeScript client against a dispatcher: --calls
// calls of the echo tool, --concurrency in flight on one Client, for each
// HTTP version (--http: 1.1, 2 or both, the default) and wire format
// (binary protobuf, then Connect's JSON), each after a warm-up of 4 ×
// concurrency calls. Prints one FIGURE line per HTTP version and format,
// with the latency percentiles of a call (submit, run on a worker, answer)
// and the client's own CPU time per call (this process's: the client's
// overhead, whatever the dispatcher's speed).
//
//   node bench.mjs --url http://127.0.0.1:8080 [--api-key KEY] [--calls 2000] [--concurrency 64] [--http both]
import { parseArgs } from "node:util";

import { Client } from "./dist/index.js";

const { values: a } = parseArgs({
  options: {
    url: { type: "string", default: process.env.TOOLWIRE_URL ?? "http://127.0.0.1:8080" },
    "api-key": { type: "string", default: process.env.TOOLWIRE_API_KEY },
    calls: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "64" },
    http: { type: "string", default: "both" },
  },
});
const n = Number(a.calls);
const conc = Number(a.concurrency);
const versions = new Map([["1.1", ["1.1"]], ["2", ["2"]], ["both", ["1.1", "2"]]]).get(a.http);
if (!Number.isInteger(n) || n < 1 || !Number.isInteger(conc) || conc < 1 || conc > 1024 || !versions) {
  console.error("bench.mjs: --calls must be at least 1, --concurrency from 1 to 1024 and --http 1.1, 2 or both");
  process.exit(2);
}

async function run(tw, calls) {
  const lat = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < calls; i = next++) {
      const t0 = performance.now();
      (await tw.call("echo", { text: `bench ${i}` })).throwIfError();
      lat.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  return lat;
}

for (const [httpVersion, json] of versions.flatMap((v) => [[v, false], [v, true]])) {
  const tw = new Client(a.url, { apiKey: a["api-key"], json, maxConns: conc, httpVersion });
  try {
    await run(tw, conc * 4); // warm-up: connections, JIT
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const lat = await run(tw, n);
    const took = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(c0);
    lat.sort((x, y) => x - y);
    const pct = (q) => lat[Math.min(Math.floor(q * lat.length), lat.length - 1)].toFixed(1);
    console.log(`FIGURE typescript-${json ? "json" : "binary"}-http${httpVersion}: ${(n / took).toFixed(0)} calls/s, ${n} calls at concurrency ${conc} in ${took.toFixed(2)}s; ` +
      `latency p50 ${pct(0.5)}ms p99 ${pct(0.99)}ms; client CPU ${((cpu.user + cpu.system) / n).toFixed(0)}us a call`);
  } finally {
    tw.close();
  }
}
