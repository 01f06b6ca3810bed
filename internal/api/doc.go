// Package api serves the dispatcher as toolwire.v1.DispatcherService over
// Connect (Connect, gRPC, gRPC-Web and JSON on one handler). It is a face
// over the dispatcher core (internal/dispatch), as internal/mcpserver and
// internal/dashboard are: every handler takes the caller's identity from
// the request's context, makes one call of the core or of one of its
// components, and translates the answer and the error. It decides
// nothing itself, so the API never answers differently from the core.
//
// # Parts
//
// NewService takes a Config (config.go): the dispatcher as Core (core.go:
// the calls, tools and sessions methods the RPCs make), its approval flow
// as Approvals (*approvalflow.Flow), its policy operations as Policies
// (*policyops.Ops) and its limits as Usage (*limitgate.Gate). The process
// (internal/dispatchd) hands them over from the dispatcher (Approvals(),
// PolicyOps(), LimitGate()). Config fills its defaults (WithDefaults) and
// NewService refuses an invalid one (Validate, naming the field). The
// package depends on the core, never the reverse: internal/dispatch
// imports nothing of it.
//
// # The API server
//
// Service.Handler serves DispatcherService behind identity.Authenticate
// and compresses only responses of Config.CompressMinBytes (1 KiB) or
// more. A request without an identity is refused unauthenticated before
// its body is read. A POST whose Content-Type no protocol of the API
// speaks (curl -d sends a form when told nothing) is answered 415 with a
// JSON body that says what to send (contenttype.go), where Connect would
// answer with an empty one. The dispatcher process serves the API with
// /healthz, /readyz and /metrics on one listener (internal/dispatchd).
// With tracing on, a caller's traceparent parents the admission span, and
// the call's trace context travels to the worker in the message headers.
//
// # Request limits
//
// Every request is bounded before it is decoded (requestlimits.go). Its
// body is read through http.MaxBytesReader (LimitBody) and Connect's read
// limit (dispatch.Config.MaxRequestBytes, default MaxArgsBytes plus 64
// KiB: 320 KiB), also after gzip decompression, whose inflating stops a
// byte past the limit (boundedGzip): a longer body is answered
// resource_exhausted having cost at most the limit, and the connection is
// closed rather than the rest read. The dispatcher process applies the
// same body limit (LimitBody) to every route of its server. The codecs
// (binary protobuf and JSON) then scan the body without allocating and
// refuse with invalid_argument one with more than MaxArgsValues plus 64
// object members, array elements or fields, or nested deeper than
// dispatch.Config.MaxRequestDepth (default twice MaxArgsDepth: 64): a
// google.protobuf.Struct (the structured arguments form) costs about 600
// bytes of allocation per value to build, so an unbounded count would let
// a body within the byte limit cost tens of MiB. Headers are bounded by
// net/http's default of 1 MiB. docs/reliability.md ("Request limits")
// gives the attacks tried and the measured time and memory of each
// refusal.
//
// # Calls
//
// Call, Submit, GetResult, Watch, GetOutput, GetDelegation and Cancel are
// the core's methods of the same names; Submit's request converts to a CallRequest
// on the wire (CallOf: the two messages share their field numbers). The
// core's errors map to codes in one place (toConnectErr): a stopped
// dispatcher is unavailable, a cancelled or expired context canceled or
// deadline_exceeded, an unknown call not_found, a call not finished
// failed_precondition, intents to apply without a session, an end reason
// too long and a page token no listing returned invalid_argument, a key
// without the admin scope (SetSessionMode, EndSession) or, under agent
// visibility "own", without admin or approve (ListSessions)
// permission_denied, session contention aborted, a full session and the
// per-caller caps (too many Watches, too many waiting requests)
// resource_exhausted, anything else internal. GetOutput answers a bad
// range or pattern invalid_argument and an output the blob store no
// longer holds not_found.
//
// A Call or GetResult whose request has the Toolwire-Client-Profile
// header (profiles.Header) gets its answer's response rendered with that
// profile (profile.go; Config.Profiles; docs/mcp.md, "Client profiles"):
// `_meta` filtered, fallbacks for the content the client cannot show. A
// name that is no configured profile is invalid_argument, checked before
// the call is submitted. Without the header the response is as the tool
// gave it: the API's callers are programs, not a client's screen. Submit
// renders the response it answers with (a finished or refused call) too.
// Watch, ListTools, GetTool, GetOutput and GetDelegation do not render: a request of
// theirs with the header is invalid_argument, rather than an answer the
// caller would take as rendered when it is not.
//
// # Tools
//
// ListTools shows only the tools whose scopes the caller holds all of
// (the core's VisibleToolsFor, which applies the session's mode, the
// model's toolset and the specs' definitions: docs/toolsets.md); GetTool answers not_found for the others and
// for those the policy hides (VisibleTool); ApproveTool needs the "admin"
// and "installation" scopes together (a definition serves every tenant:
// a tenant's admin may not approve it). Both show a tool's executor
// configuration (the spec's config: sandbox argv, environment and paths;
// HTTP URL and body templates, headers, allowed hosts and networks; MCP
// server, tool and definition hash) to those scopes together only ("*"
// holds "admin", never "installation"); everyone else gets the
// spec with no config set, its executor type kept. A format other than
// native renders the same specs as an LLM provider's tool list
// (registry.Export). A ListTools naming a session lists (and exports) the
// tools of that session: those its mode forbids outright are left out
// (the core's VisibleToolsIn), and a tool the session pins a version of
// is listed at that version, as its calls run it (a pinned version gone
// or disabled is left out); another session, or none, sees them —
// but for the policy's sessions.default_mode, the mode of a session
// without one and of a list naming none. A ListTools naming a model
// lists (and exports) what the toolset of its family offers (the
// core's VisibleToolsFor; docs/toolsets.md): hidden and substituted
// tools left out, schema variants in place of the tools' schemas; a
// model that is not a model name is invalid_argument. Call and Submit
// carry the request's model to admission, which applies the same
// toolset.
//
// # Pools
//
// ListPools (pools.go) lists the pools as this replica's load view last
// read them, with their pauses, to keys with the "installation" scope
// (pools serve every tenant; permission_denied otherwise, as the
// dashboard's pools page). PausePool and ResumePool need the "admin" and
// "installation" scopes together (dispatch.ErrPauseScope:
// permission_denied); an unknown pool is not_found, a reason over 512
// bytes or not UTF-8 invalid_argument, and a pause or resume that other
// changes of the consumer kept undoing (bus.ErrPauseOverlapped) aborted:
// it may not be in force; list the pools and ask again (internal/dispatch
// doc.go, "Paused pools").
//
// # Approval RPCs
//
// ListApprovals, GetApproval, Approve, Deny, ListGrants and RevokeGrant
// (approvals.go) need the "approve" scope and act on the caller's tenant;
// internal/approvalflow does their work. A missing scope is
// permission_denied, an unknown approval not_found, one decided already
// failed_precondition, a bad request invalid_argument, and a bucket that
// did not answer unavailable.
//
// # Policy RPCs
//
// ApplyPolicy, RemovePolicy, GetPolicy, ListPolicyVersions and Explain
// (policies.go) need the "admin" scope and act on the caller's tenant,
// from its credentials, never from the request; internal/policyops does
// their work (its doc.go says what each does), the handlers only
// translate. A refused document, request or comment is invalid_argument
// (the message names the lines), an unknown tool or version not_found, a
// dispatcher without a policy source or a stored document that does not
// parse failed_precondition, a store over its quota resource_exhausted,
// a store failure unavailable.
//
// # Usage
//
// GetUsage (usage.go) reads the limits in force for the caller's tenant
// as they stand for an agent, session, user or run (limitgate.Gate.Report):
// another agent's usage needs the admin scope (permission_denied), and a
// name longer than a key may be is invalid_argument.
//
// # Decisions on request limits
//
// Where the issue that introduced the request limits was silent:
//
//   - The body limit is MaxArgsBytes plus 64 KiB, not more: in the JSON
//     encoding arguments_json is a JSON string, so its quotes and
//     backslashes count twice, and arguments near the limit that are rich
//     in quotes need the object form, binary protobuf (pkg/client) or a
//     larger --max-request-bytes. A tool whose spec allows more than
//     MaxArgsBytes needs the body limit raised too.
//   - The body scan allows 64 values above MaxArgsValues, so arguments at
//     the limit reach admission and its VALIDATION answer; only bodies far
//     over it are cut short as invalid_argument.
//   - Exceeding the values or depth scan is invalid_argument (the codec's
//     code in Connect), not resource_exhausted: the body is within its
//     size, its shape is what is refused.
package api
