// Package worker consumes calls from a pool's durable pull consumer and
// executes them.
//
// # The life of a delivered call
//
// decode → integrity (the subject agrees with the payload; the tool and its
// pinned spec version are served here) → a redelivered call whose result
// already exists is acknowledged without running → schedule-to-start and
// schedule-to-close deadlines (EXPIRED, never executed late) → the
// executor, under the attempt's timeout, with InProgress heartbeats every
// AckWait/3 → the response, cut to the inline limit with the full output in
// the blob store → the result published with ExpectLastSequencePerSubject(0),
// so the server refuses a second result for the same call → ack.
//
// Every message is settled on every path: undecodable calls, subjects that
// disagree with their payload and unknown tools or versions are answered
// (when the call can be decoded), dead-lettered and terminated — never
// retried, never crashing the worker. A panicking tool answers INTERNAL.
//
// # Flow control
//
// A pool fetches at most its free slots (Concurrency minus calls in
// flight), so no call waits in a client buffer while its AckWait runs.
//
// # Shutdown
//
// Stop ends fetching, lets in-flight calls finish while their heartbeats
// continue, and when its context ends cancels the rest with ErrShutdown and
// Naks them without delay: a call interrupted by shutdown is handed back,
// not failed. (JetStream still counts that delivery toward MaxDeliver.)
//
// Retries of retryable errors, cancellation and dead-lettering after
// MaxDeliver belong to the delivery-semantics work; for now every executed
// attempt's outcome is terminal.
package worker
