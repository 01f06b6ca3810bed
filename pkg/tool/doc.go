// Package tool is the public API for writing native toolwire tools: typed
// Go functions that a worker runs for calls published on JetStream.
//
// # One declaration
//
// A native tool is one function and the types it takes and returns:
//
//	type WeatherIn struct {
//		City  string `json:"city" jsonschema:"the city to report on"`
//		Units string `json:"units,omitempty" jsonschema:"metric or imperial"`
//	}
//
//	weather := tool.Must(tool.New("weather",
//		func(ctx context.Context, in WeatherIn) (WeatherOut, error) { ... },
//		tool.WithSummary("Current weather of a city."), tool.ReadOnly()))
//
// New derives everything else from that declaration. The input JSON Schema
// (draft 2020-12) comes from the input type: fields are required unless
// tagged omitempty or omitzero, and a `jsonschema:"..."` tag becomes the
// field's description. The output schema comes from the output type when
// it is a struct. The dispatcher validates every call's arguments against
// the input schema before queueing it, so the function sees arguments that
// decode into its type; Invoke reports anything that still does not decode
// as a VALIDATION error naming the field. Tool.Spec is what the registry
// publishes; Options add the rest of the spec (title, summary, annotations,
// timeouts, retry policy, scopes, declared intents, limits, approval).
//
// # Output
//
// What the function returns becomes a Result: content blocks for the
// model, structured JSON for programs, intents for the orchestrator. A
// struct is returned both ways, as structured JSON and as a text block
// holding the same JSON; implement ContentProvider to choose the blocks, or
// return a *Result to control everything. See Tool.Invoke.
//
// # Errors
//
// Return an *Error (Errorf, Transient, Permanent, InvalidArgument) when the
// tool knows what went wrong: its Type, Retryable flag and SideEffects
// decide whether the worker retries. Any other error is reported as
// PERMANENT with possible side effects (see AsError). A function that stops
// because its context was cancelled should return ctx.Err(): the worker
// reports CANCELLED or TIMEOUT with the cause. A panic is recovered by the
// executor and reported as INTERNAL.
//
// # Progress and partial output
//
// Progress reports how far a call is; Partial and PartialText send
// output before the result (docs/tools.md, "Partial output"). Both
// become PROGRESS events that Watch streams and the MCP face relays to
// clients that gave a progress token, and both count as heartbeats.
// Decisions:
//
//   - A chunk of partial output is content blocks, the same type as a
//     result's, so that every face can show it as it shows results.
//   - Partial output is a preview: the result is what the function
//     returns, never assembled from chunks, so a caller that only waits
//     for the result loses nothing, and a chunk lost in a fault loses no
//     output.
//   - The bounds (MaxPartialChunks, MaxPartialBytes, MaxPartialChunkBytes)
//     and the numbering (CallEvent.partial_seq, from 1) are kept here, per
//     WithReporter — a worker installs one reporter per attempt — so every
//     reporter gets bounded, numbered chunks, one at a time, in order. A
//     chunk over MaxPartialChunkBytes is refused alone (the tool can split
//     it); past the total bounds nothing more is sent for the attempt.
//     A refused chunk still counts as a heartbeat (PartialReporter's
//     Heartbeat): a tool past the bound is alive, and must not die of a
//     heartbeat timeout for calling Partial.
//   - The reporter refuses chunks once the attempt has ended
//     (ErrPartialClosed), so no chunk is stored after the result.
//   - Outside a call Partial does nothing and returns nil, as Progress
//     does: a tool's unit test needs no reporter.
//
// # Intents
//
// Tools do not change session state themselves; they ask the orchestrator
// to, with EmitIntent during the call. The intents travel with the Result,
// in order, and each is applied once. A tool may emit only the intent types
// its spec declares (WithIntents).
//
// # Asking the caller for input
//
// A tool that needs its caller's input before it can finish (a user's
// confirmation, a completion from the caller's model, its roots) returns
// NeedInput with its requests (Elicit, Sample, ListRoots) and a state of
// its own; the call ends there, and the caller answers with a new call of
// the same tool and arguments, in which InputFrom gives the tool the
// answers and its state back. Callers hold only the call id, so they
// cannot alter the state; but it is stored with the response, which the
// tenant's callers can read, so it must hold no secret (a state holding a
// readable copy of a secret argument's value is refused). ClientCan says
// what the caller declared it can answer. docs/mcp.md, "Tools that ask
// for input", has the rules.
//
// # Call information
//
// CallInfoFrom tells a tool which call it is executing: call id, attempt
// and caller (tenant, agent, session, user). Use the call id as an
// idempotency key towards external systems, so that a retried attempt does
// not repeat a side effect.
//
// # Goroutines
//
// A worker runs a tool on a goroutine that serves one call after another.
// Honour the context (a tool that ignores it past the worker's watchdog is
// abandoned, and its goroutine is held until it returns), and undo what
// stays with a goroutine: pair runtime.LockOSThread with UnlockOSThread and
// restore goroutine labels before returning.
package tool
