// Package executortest is the conformance suite every executor passes
// (DESIGN §7): content blocks of each kind it supports, argument errors,
// timeouts, cancellation that really stops the work, crashes, oversized
// output, progress, intents and error mapping.
//
// An executor's test builds a Subject — the executor plus one fixture tool
// per behaviour, declared the way a user of that executor would declare
// it — and calls Run. Fixtures an executor cannot express are left out of
// the map and reported as not applicable; everything present must pass.
package executortest
