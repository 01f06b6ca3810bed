// Package native is the executor of native tools: typed Go functions
// compiled into the worker binary and defined with tool.New.
//
// An Executor holds a set of tools by name. Execute finds the tool a call
// names — the spec's NativeConfig.Function, else the spec's name, else the
// call's tool — and invokes it with the call's exact argument bytes. A name
// it does not hold is NOT_FOUND with no side effects, so a worker whose
// binary lacks a tool answers rather than retries.
//
// A panicking tool does not take the worker down: Execute recovers it,
// logs the stack at Error and answers INTERNAL ("tool panicked: ...") with
// unknown side effects, since the tool may have done anything before it
// panicked. The panic value, in the log line and the answer, shows
// "[REDACTED]" for the values of secret arguments (internal/redact).
// Panics in goroutines a tool starts itself cannot be recovered and still
// crash the process.
//
// Everything else — timeouts, retries, cancellation causes, heartbeats,
// truncation — belongs to the worker around the executor. Errors returned
// by tools are passed through unchanged for the worker to map with
// tool.AsError.
package native
