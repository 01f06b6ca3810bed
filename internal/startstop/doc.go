// Package startstop is the one lifecycle contract of toolwire's long-lived
// components (River's startstop is the model).
//
// A Service starts with Start(ctx), which returns once it runs, and ends
// with Stop(ctx), which blocks until its goroutines have returned or ctx
// ends. Both are idempotent and safe for concurrent use; Stop before Start
// is harmless, and a stopped service does not start again (ErrStopped).
//
// A process is a Group: its services in the order they start, written
// once, where the group is built; Stop ends them in reverse. A failed
// Start stops what had started, so that nothing is left running.
//
// Funcs adapts a start function and a "tell it to end, return a done
// channel" function to the contract; Loop runs one goroutine as a Service.
package startstop
