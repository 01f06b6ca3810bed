// Package houserules holds no code: its tests are the house rules this
// project agreed on, so that a change that breaks one fails `make test`
// the day it is made, not a review a week later.
//
// The rules (houserules_test.go, one test each):
//
//   - The dispatcher core depends on no worker: `go list -deps
//     ./internal/dispatch` names no internal/worker, internal/workerconfig,
//     internal/executors/... or pkg/toolworker package.
//   - Small functions where the calls live: in internal/worker,
//     internal/dispatch and the admission, approval, hook, limits,
//     maintenance and API packages, no function is over 100 lines and
//     none takes more than 4 parameters (the receiver not counted, a
//     variadic counted once; generated code excluded). Pass a per-call
//     value instead.
//   - Nothing imports examples/: they are copies to start from, not
//     libraries.
//   - Every package whose code starts a goroutine has a goleak check in
//     its tests (goleak.VerifyTestMain or goleak.VerifyNone).
//   - One lifecycle shape: a type with Start and Stop methods has
//     startstop.Service's (Start(ctx) error, Stop(ctx) error).
//   - Every package under internal/ and pkg/ has a row in
//     docs/architecture.md's package table (generated packages excepted).
//   - pkg/ names no internal type: no exported declaration of a package
//     under pkg/ mentions a type of a package under internal/, so an SDK
//     user can name every type the SDK gives them.
package houserules
