// Package builtin holds the native tools every toolwire installation ships:
// echo, sleep, fail and remember. They have no side effects and exist to
// exercise the fabric end to end — a newcomer's first call, load and
// latency tests, timeouts and cancellation, every error type and retry
// decision, and intents — with nothing to install.
//
//   - echo returns its text unchanged, as a text block and as {"text": ...}.
//   - sleep waits for a Go duration (at most an hour) and honours
//     cancellation at once.
//   - fail returns the typed error it is asked for, or panics on
//     type "PANIC".
//   - remember changes no state itself: it returns a SET_STATE intent
//     asking the orchestrator to set a session value under a key (a null
//     value forgets it), which the dispatcher's reference applier applies
//     (Call with apply_intents, ApplyIntents).
package builtin
