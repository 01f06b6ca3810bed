// Package executors defines the one seam every executor type implements:
// Executor runs one attempt of a call under a context and returns a
// tool.Result or a typed error. Each type lives in its own package (native
// here; mcp, sandbox and http follow) and all pass the shared conformance
// suite in executortest.
//
// Cross-cutting concerns — timeouts, retries, heartbeats, tracing, metrics,
// truncation — are applied by the worker around an executor, never inside it.
package executors
