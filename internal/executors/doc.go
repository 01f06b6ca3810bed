// Package executors defines the one seam every executor type implements:
// Executor runs one attempt of a call under a context and returns a
// tool.Result or a typed error. Each type lives in its own package (native
// here; mcp, sandbox and http follow) and all pass the shared conformance
// suite in executortest.
//
// Executors that hold resources beyond a call (MCP sessions and server
// processes, sandboxes, HTTP connections) implement Closer, one signature
// for all: Close(ctx) error, idempotent, returning ctx's error if it gave
// up. Whoever owns them (internal/workerconfig's Worker, which the worker
// process and the dispatcher's in-process workers stop) closes them with
// Close once the worker has stopped; decorators (internal/executors/observed)
// pass Close through.
//
// Cross-cutting concerns — timeouts, retries, heartbeats, tracing, metrics,
// truncation — are applied by the worker around an executor, never inside it.
package executors
