// Package mcp is the executor of tools imported from MCP servers, built on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk v1.8.0), over
// stdio (a child process) and streamable HTTP.
//
// # Use
//
//	w := registry.PoolWriter{Writer: registry.NewRemote(bus.NC, bus.Config, log), Pool: "mcp", Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP}
//	e, err := mcp.New(ctx, cfg.MCP, mcp.Options{Registry: bus.Registry, Conn: bus.NC, Writer: w, Logger: log})
//	...
//	worker.New(b, worker.Config{
//		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP: e},
//		Specs:     e.Specs(),
//		...
//	})
//	...
//	defer e.Close(ctx) // after the worker has stopped
//
// New connects to every server of the Config, imports its tools and
// returns; Specs gives the worker the specs to publish; Execute runs a
// call; Close ends the sessions and kills the stdio servers. Changed fires
// whenever the set of tools or the state of one changes.
//
// # Servers and sessions
//
// Each configured server has exactly one MCP session at a time, shared by
// every concurrent call: MCP multiplexes requests over a session by
// JSON-RPC id, a stdio server is one process with one stdin, and a
// streamable HTTP session already sends each request as its own POST. More
// sessions would multiply server-side state (subscriptions, session
// resources) without adding parallelism.
//
// A goroutine per server keeps the session up: connect (start the process
// or dial), initialize, list the tools; then wait for the session to end
// or for tools/list_changed. When the session ends — the process crashed
// or was killed, the HTTP server went away — the process group is killed,
// and the server is connected again after an exponential, jittered backoff
// (Config.MinBackoff to MaxBackoff, reset after a session that lived
// longer than MaxBackoff). Calls arriving meanwhile wait up to
// Config.SessionWait for the next session and then fail TRANSIENT with no
// side effects. A call the SDK refused to send because its session was
// already closing (mcp.ErrConnectionClosed: the request never left) is
// sent again on the next session. A server that fails its first attempt
// is logged and retried in the background; New fails only for servers
// marked Required.
//
// Stdio servers run without a shell, with exactly the environment the
// config allows (the named variables of the worker's environment plus
// fixed ones; not even PATH otherwise), in their own process group
// (Setpgid). CommandTransport.TerminateDuration is Config.TerminateDuration
// (default 1s; the SDK's default of 5s would hold every close): closing a
// session closes the server's stdin, waits, sends SIGTERM, waits, sends
// SIGKILL, and then the whole process group is killed (kill -pgid), so
// grandchildren do not outlive their server. Close past its context kills
// every group at once. The server's stderr is logged at Debug.
//
// Streamable HTTP servers get the configured headers on every request;
// secret headers are resolved from "env:NAME" or "file:/path" at each
// connection and never logged (errors name the reference, not the value).
//
// The client advertises no capabilities (no roots, sampling or
// elicitation): a worker has no user or model to ask.
//
// # Discovery and names
//
// Each tool of server S named T becomes the toolwire tool mcp__S__T
// (characters of T outside [a-zA-Z0-9_-] become '_'; server names allow
// letters, digits and '-' only, so the name splits back unambiguously). A
// tool whose name would exceed 64 characters, whose sanitized name
// collides with another tool of the server, or whose schemas do not
// compile is not imported, with a warning naming it. The spec carries
// the executor type MCP, provider S, McpConfig{server, tool,
// definition_hash, task_support}, the title (or annotations' title), the description,
// the input and output schemas as canonical JSON text, the annotations
// as ToolAnnotations, the tool's icons (ToolSpec.icons) and `_meta`
// (ToolSpec.meta_json; each left out, with a warning, past 64 KiB: a spec
// is one registry value) and its execution.taskSupport as the server wrote
// it (McpConfig.task_support).
//
// A tool whose taskSupport is "required" can only be called with task
// augmentation (SEP-1686), which toolwire does not use (the SDK has none):
// it is imported disabled, its DisabledReason saying so, whatever its
// approval; admission refuses its calls with NOT_FOUND and the reason, and
// so does Execute. "optional" tools are served with plain calls.
//
// # Fields the SDK's types drop
//
// The SDK's Tool type has no `execution`, and its Annotations cannot tell
// a priority of 0 from none (float64 with omitempty). Each connection
// therefore has a rawCapture that sees the JSON-RPC messages as they pass
// and keeps the raw result of every tools/list and tools/call (matched by
// JSON-RPC id; a call by its progress token) before the SDK returns it:
// for stdio a wrapped Connection; for streamable HTTP the round trips of
// its http.Client (the request body, and the response body — a JSON body
// or server-sent events — as the SDK reads it), since a wrapped
// Connection would hide the SDK's own optional interfaces of its HTTP
// connection (the negotiated protocol version header, the standalone SSE
// stream). A message over 32 MiB is not captured: its zero priorities and
// its tools' execution are then lost, as with the SDK alone.
//
// # Pinned definitions (trust on first use)
//
// DefinitionHash is "sha256:" and the SHA-256 of the canonical JSON
// (sorted keys, no white space) of the tool's name, title,
// description, input schema, output schema and annotations — everything
// the model sees or the executor relies on. The first hash seen for a
// tool is recorded as approved (key registry.ApprovalKey(name) in the
// registry bucket, written by a dispatcher: the executor announces it
// through Options.Writer, registry.OpApprove, and a recorded approval is
// never replaced that way). When a server later
// offers a different definition — at start-up (a new release of the
// server) or after notifications/tools/list_changed — the tool's spec is
// published disabled (the registry's admission refuses it), with a
// DisabledReason saying the definition changed from X to Y and giving the
// command that approves it (toolctl tools approve NAME --hash Y, or the
// ApproveTool RPC). Execute refuses calls to it with PERMISSION_DENIED and
// no side effects, before anything reaches the server. The executor
// watches the approval keys; once the approved hash equals the current
// definition's, the enabled spec is published and calls are served again.
// A server can therefore not swap a tool under the agents.
//
// A call carries the spec it was admitted with; if its definition hash is
// not the server's current one (the server changed and the change was
// approved while the call waited), Execute refuses it with NOT_FOUND and
// no side effects, so it never reaches a definition it was not admitted
// for. The window between a server changing a tool and its list_changed
// notification cannot be closed from the client side; servers that do not
// notify are only checked at (re)connection.
//
// Without Options.Registry the approval is kept in memory: the first
// definition this process sees is approved, a later different one is
// disabled until restart, and nothing is published.
//
// Publishing: the worker publishes Specs at its start. After that the
// executor publishes (Options.Writer: an announcement the dispatchers
// check and write, as the worker's) every state change of the tools
// Specs handed out: disabled, re-enabled, no longer offered (published
// disabled). Tools first discovered later (a server that came up after
// start, a tool the server added) appear in Specs and fire Changed but are
// not published by the executor: an enabled spec nobody consumes would
// admit calls that never run. The worker publishes them: it serves the
// executor as a SpecSource (internal/worker), reads Specs again after
// every Changed, extends its pool consumer to the new tools and only then
// serves and publishes their specs. A re-approved changed definition (a
// new spec version) reaches the running worker the same way; a worker
// given only the start-up Specs, without the executor as its SpecSource,
// serves neither until it restarts.
//
// # Calls
//
// Execute validates the arguments against the tool's input schema
// (VALIDATION with field violations, no side effects; MCP servers differ
// in how they report bad arguments, so this is checked here), sends
// tools/call with the exact argument bytes and a progress token, and maps
// the result.
//
// Progress: notifications/progress for the call's token become
// tool.Progress(ctx, message, percent) on the call's context (percent =
// progress/total*100 when the server gives a total, else unknown); the
// worker turns them into PROGRESS events and heartbeats. The SDK handles
// notifications on another goroutine than responses, so a notification
// the server sends just before its result may be handled after Execute
// returned; it is then dropped.
//
// Cancellation: when the call's context ends, the SDK retires the request
// at once and sends notifications/cancelled asynchronously (verified: the
// conformance suite's Block fixture sees its handler's context cancelled
// on the server). Execute returns the context's error, wrapped; the worker
// maps it with tool.AsError (deadline → TIMEOUT, cancel → CANCELLED, both
// with unknown side effects).
//
// # Results and content
//
// Content blocks map one to one, in both directions (internal/mcpcontent,
// the mapping the MCP server face and the after-hooks share): text, image,
// audio (decoded bytes), resource link,
// embedded resource (text or blob, with its own `_meta`), annotations
// (audience, priority, lastModified) and each block's `_meta` as
// Content.meta_json, and a resource link's icons (ResourceLink.icons).
// Nothing is flattened to text. A priority of exactly 0 is restored from
// the result's JSON (mcpcontent.ZeroPriorities; see Fields the SDK's
// types drop); the mapping back cannot write it (the SDK omits it). Sampling's
// tool_use and tool_result blocks are not valid in tool results and make
// the result invalid (INTERNAL).
//
// Structured content becomes Result.Structured, re-encoded as JSON by
// encoding/json (the SDK decodes it into Go values: keys come out sorted,
// and integers beyond 2^53 lose precision).
//
// Intents travel in the result's `_meta` (MetaIntents):
//
//	"_meta": {"toolwire/intents": [{"type": "SET_STATE", "payload": {...}}, ...]}
//
// They become Result.Intents in order with ids i1, i2, ...; a malformed
// list makes the result invalid (INTERNAL). Intents of an isError result
// are ignored. The result's whole `_meta` (intents and the server's own
// keys included) is kept as Result.Meta, ToolResponse.meta_json.
//
// # Errors
//
// An isError result is a *tool.Error that keeps the result's content
// blocks (Content), structured output (Structured) and `_meta` (Meta); its message is the
// text of its text blocks. Its type is PERMANENT with possible side
// effects, unless the result's `_meta` (MetaError) says otherwise:
//
//	"_meta": {"toolwire/error": {"type": "RATE_LIMIT", "retryable": true,
//	          "sideEffects": "NONE", "retryAfterMs": 2000, "suggestion": "..."}}
//
// (type and sideEffects are ErrorType and PartialSideEffects names, with or
// without their prefix; retryable defaults per type: TRANSIENT,
// RATE_LIMIT, OVERLOADED and TIMEOUT retry.)
//
// JSON-RPC errors: -32602 invalid params → VALIDATION, no side effects
// (but an "unknown tool" message → NOT_FOUND); -32601 method not found →
// NOT_FOUND, no side effects; any other code → PERMANENT, side effects
// possible. A connection lost mid-call, or an HTTP request that failed
// before a response came (the SDK's -32005 "rejected by transport", as on
// a connection a restarting server cut) → TRANSIENT, retryable, side
// effects NONE for read-only tools and UNKNOWN otherwise (the worker
// reruns it only when the tool's annotations say it is read-only or
// idempotent). A stdio server that panics dies, so a panicking tool is
// such a TRANSIENT failure, and its server is restarted.
//
// Refusals before the server is reached (unknown tool, disabled tool,
// stale definition, invalid arguments, server down) carry side effects
// NONE.
package mcp
