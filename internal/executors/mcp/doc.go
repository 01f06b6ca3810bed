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
// Each configured server has one discovery session: it imports the tools,
// follows tools/list_changed and, when the server's ServerConfig.Sessions
// is "shared", carries every call. MCP multiplexes requests over a
// session by JSON-RPC id, so one session gives all the parallelism; what
// it also shares is the server-side state of the session.
//
// A goroutine per server keeps the discovery session up: connect (start the process
// or dial), initialize, list the tools; then wait for the session to end
// or for tools/list_changed. When the session ends — the process crashed
// or was killed, the HTTP server went away — the process group is killed,
// and the server is connected again after an exponential, jittered backoff
// (Config.MinBackoff to MaxBackoff, reset after a session that lived
// longer than MaxBackoff). Calls arriving meanwhile wait up to
// Config.SessionWait for the next session (under "shared") and then fail
// TRANSIENT with no side effects. A call the SDK refused to send because its session was
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
// every group at once, caller sessions' included. The server's stderr is logged at Debug.
//
// Streamable HTTP servers get the configured headers on every request;
// secret headers are resolved from "env:NAME" or "file:/path" at each
// connection and never logged (errors name the reference, not the value).
//
// The client advertises no capabilities (no roots, sampling or
// elicitation): a worker has no user or model to ask.
//
// # Upstream sessions
//
// Many MCP servers keep state per MCP session: a browser page, a working
// directory, a toggled option, a subscription, a login. One session for
// every call would show each tenant the state another tenant left (and let
// it change it). ServerConfig.Sessions says which calls share an upstream
// session:
//
//   - "per_tenant" (the default): one session per tenant. No state
//     crosses tenants; the calls of one tenant (its agents and sessions)
//     share a session, as they share a trust domain.
//   - "per_session": one session per caller session, keyed by tenant and
//     session id (an id is never looked up across tenants); a call
//     without a session id uses its tenant's session.
//   - "shared": one session, the discovery session, for every call of
//     every tenant (the behaviour before per-tenant sessions). Only for
//     servers that keep no state per session.
//
// Tenant and session are the Caller fields the dispatcher set on the
// ToolCall from the caller's credential and request, never anything of
// the arguments.
//
// The default is per_tenant because it is the one safe for any stateful
// server at a bounded cost: sharing leaks state across tenants, and
// per_session costs a connection for every conversation. The cost is
// real: every active tenant holds an upstream connection of its own, and
// for a stdio server a session is a process of its own (started with the
// same command, environment and process group handling as the discovery
// process), next to the discovery session. Set "shared" for a stateless
// server that is expensive to start.
//
// Caller sessions are opened at a caller's first call (within
// Config.ConnectTimeout; a failure is TRANSIENT, retryable, no side
// effects, with a generic message: the cause, which may name hosts,
// paths or a URL, is logged at Warn, not returned to the agent) and
// pooled per server. They only call tools: the tools, their definitions
// and approvals are those of the discovery session. A caller session
// lists the server's tools when it opens; a call is sent on it only when
// the session lists the called tool with the definition hash the
// discovery session imported (and that was approved). Otherwise the call
// is refused TRANSIENT (retryable, no side effects), the session is
// retired and the discovery session lists the tools again (a changed
// definition then disables the tool as below). A caller session that
// announces notifications/tools/list_changed is retired (no new calls;
// closed when its calls ended), so its tools are checked again on a new
// session.
//
// The pool holds at most ServerConfig.MaxSessions sessions (default 16
// for HTTP servers and 4 for stdio servers, whose sessions are
// processes; at most 1024), counting the sessions still closing (a stdio
// process being stopped may take up to twice Config.TerminateDuration to
// exit, an HTTP session its DELETE): the server never has more than
// MaxSessions caller sessions, plus the discovery session, from one
// worker. Under "per_session" one tenant holds at most
// ServerConfig.MaxSessionsPerTenant of them (default max(1,
// MaxSessions/4)), so a tenant with many conversations cannot take every
// session or push the other tenants' out; its next conversation replaces
// its own least recently used idle session. (Under "per_tenant" a
// tenant has one session; MaxSessionsPerTenant is ignored.)
//
// A call whose key has no session, when there is no room, waits in
// line, oldest first among the calls that can be served: when the pool
// is full, the least recently used session without a call in flight is
// closed for it (its own tenant's first; that caller's server-side state
// is lost, as after an idle close) and the call gets the room once that
// session has ended; when every session has a call in flight, it waits
// for one to become idle. A session with calls in flight is never closed
// for room: that would fail its calls midway. A call that got no room
// within Config.SessionWait (default 10s) is refused OVERLOADED,
// retryable after a second, with no side effects; its context ending
// ends the wait too. A session with no call for ServerConfig.SessionIdle
// (default 5m) is closed: an HTTP session is ended (DELETE), a stdio
// process is stopped as on Close below. A session whose connection ends
// (a killed process) leaves the pool; its caller's next call opens a new
// one. Close closes every session and waits for them.
//
// MaxSessions, MaxSessionsPerTenant and SessionIdle do not apply under
// "shared" (its one session is the discovery session). The pool, its
// caps and its sessions belong to one worker process: every worker
// replica serving the server holds its own, so the server sees up to the
// replicas' number times MaxSessions caller sessions, and a tenant's
// calls landing on two replicas use two sessions (with separate
// server-side state).
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
// it (McpConfig.task_support) and as ToolSpec.task_support ("forbidden"
// when the server gives none, MCP's default), which toolwire's MCP
// endpoint advertises and honours for the tool.
//
// A tool whose taskSupport is "required" can only be called with task
// augmentation (SEP-1686), which toolwire does not use (the SDK has none):
// it is imported disabled, its DisabledReason saying so, whatever its
// approval; admission refuses its calls with NOT_FOUND and the reason, and
// so does Execute; the MCP endpoint does not list it. "optional" tools are
// served with plain calls (a toolwire task on the MCP endpoint is
// toolwire's, not the server's).
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
// Caller sessions (see Upstream sessions) are held to the same
// definitions: a call is sent on one only when it lists the called tool
// with the imported definition's hash. A server can therefore not swap a
// tool under the agents (but for the window below).
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
// The call goes to the upstream session of its caller (see Upstream
// sessions).
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
// stale definition, invalid arguments, server down, no caller session
// free within Config.SessionWait, a caller session that cannot be opened
// or lists another definition) carry side effects NONE.
package mcp
