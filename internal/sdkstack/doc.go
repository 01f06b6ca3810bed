// Package sdkstack starts the stack the SDKs' tests run against
// (sdk/python, sdk/typescript): an embedded JetStream server, a dispatcher
// with its Connect API on loopback behind API keys, approval token keys and
// a policy (a deny rule, an ask rule, a rate limit, a toolset for the gpt
// model family), and a worker serving
// the built-in tools and the test tools (steps reports progress, hold runs
// until cancelled and counts the cancellations that reach it, deploy is
// what the ask rule covers and ping what the rate limit covers).
//
// Decisions:
//   - One stack shape for every SDK, so that the scenarios of issue 34
//     (call, validation error, policy deny, ask → approve → run, token
//     redeem, watch with progress, cancel reaching the worker, intents
//     applied to a session, a rate limit's retry_after) meet the same
//     rules in each language.
//   - Each test gets its own stack and its own keys (random, written to a
//     key file in t.TempDir()): the rate limit's one ping an hour is the
//     test's own.
package sdkstack
