// Package builtin holds the native tools every toolwire installation ships:
// echo, sleep and fail. They have no side effects and exist to exercise the
// fabric end to end — a newcomer's first call, load and latency tests,
// timeouts and cancellation, and every error type and retry decision — with
// nothing to install.
//
//   - echo returns its text unchanged, as a text block and as {"text": ...}.
//   - sleep waits for a Go duration (at most an hour) and honours
//     cancellation at once.
//   - fail returns the typed error it is asked for, or panics on
//     type "PANIC".
package builtin
