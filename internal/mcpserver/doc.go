// Package mcpserver makes a dispatcher an MCP server for the whole fleet
// (DESIGN §13, docs/mcp.md): Streamable HTTP on /mcp of the API port,
// built on the official Go SDK in stateless mode, serving the protocol
// revisions 2026-07-28, 2025-11-25 and 2025-06-18.
//
// # Parts
//
// New takes the dispatcher as Core (core.go: the calls the endpoint makes,
// each with the caller's identity), an authenticator, and a Config whose
// Tasks is the tasks bucket (nil: no Tasks extension); the process
// (internal/dispatchd) hands them over. Config fills its defaults
// (WithDefaults) and New refuses an invalid one (Validate).
//
// # No state per instance
//
// The SDK serves each request with a temporary session, and nothing of a
// client is kept between requests: any replica answers any request. The
// tool list is the registry (every replica watches it), and a call is a
// toolwire call, whose state is in JetStream.
//
// # Tools
//
// tools/list and tools/call are answered by a receiving middleware, not by
// tools registered in the SDK: the list is per caller (the tools its
// scopes and the policy let it see, as ListTools), in name order, with the
// names the registry has (so they never change when a pool or a server is
// added), 100 per page (the cursor is the page's last name, opaque), and
// cacheScope private. Disabled tools are left out (an imported MCP tool
// whose definition changed, or that requires task augmentation): every
// call of one is refused. A tool's MCP form is registry.ExportOne's (title,
// description from the summary, schemas, annotations, icons, _meta,
// execution.taskSupport). tools.listChanged is declared: each replica's
// registry watch (registry.Store.OnChange) makes its one long-lived SDK
// server send notifications/tools/list_changed to the clients listening
// on it (subscriptions/listen), by adding and removing a marker tool (the
// SDK has no other way to send it; toolsChanged).
//
// tools/call is a toolwire call (dispatch.Submit and a wait for its
// result, or dispatch.Call on the fast path): admission, policy,
// approvals (the call waits for an approver, unless its caller's user
// confirms it: "Confirming an ask"), limits and the loop guard apply
// unchanged. The response maps one to one, as the client's profile
// renders it ("Client profiles"): content blocks
// (internal/mcpcontent, the MCP executor's mapping; an annotation's
// priority of 0, which the SDK's types omit, is written back: toolResult),
// structuredContent,
// the tool's _meta, and a failure as isError with the error's text and,
// in _meta "io.toolwire/error", its type, retryability, side effects,
// suggestion and retry-after. "io.toolwire/call_id" names the call;
// "io.toolwire/latency_budget_exceeded" (MetaLatencyBudget) says that it
// took longer than its soft latency budget, as the API's meta does. A
// request's _meta "io.toolwire/session" (MetaSession, a string) is the
// call's toolwire session: a call in a session that END_SESSION ended is
// refused SESSION_INACTIVE at admission (the fast path does not know the
// key and leaves such a request to the SDK), and so are the session
// rules of the tenant's policy (sessions:): under required a tools/call
// without the key is refused PERMISSION_DENIED, under opened_only one
// naming a session nobody opened SESSION_INACTIVE, both as isError
// results. A tools/list whose _meta
// names a session (the same key: an MCP session, where there is one, is a
// transport's and may carry the calls of many toolwire sessions; the
// stateless revision has none) lists that session's tools: those its mode
// forbids outright are left out (dispatch's VisibleToolsIn; a session
// without a mode, or a list naming none, as the policy's
// sessions.default_mode); each page's request names it again. A
// tools/list or tools/call may name the model it is for (model.go): the
// Toolwire-Model header (ModelHeader) or io.toolwire/model in its _meta
// (MetaModel), both only when they agree (invalid params otherwise);
// the policy's toolset for the model's family then decides what is
// listed and called (docs/toolsets.md). A tools/call naming a model may
// take the fast path: the model goes into its CallRequest as on the SDK
// path, and admission applies the toolset (a tool it hides or
// substitutes refused, a variant's schema checked) in dispatch.Call as
// in dispatch.Submit; a model the SDK path would refuse (not a string,
// not a model name, header and _meta disagreeing) is left to it. The
// cached MCP form of a tool is keyed by its input schema too, so a
// variant never reaches another model. An unknown tool is a JSON-RPC invalid-params error (the client's mistake,
// not the tool's). When the client goes away (the request's context ends:
// a closed stream; for revisions before 2026-07-28, whose requests the SDK
// gives a context that never ends, the HTTP request's end) or cancels the
// request ("Cancelling"), the call is cancelled, and the cancel reaches
// the worker; so is a call whose wait fails otherwise (nobody would take
// its result). A call whose records are gone (UNKNOWN) ends the wait with
// an error.
//
// With a progress token, the call's PROGRESS events are relayed as
// notifications/progress (relayProgress, a Watch of the call) and every
// one reaches the client before the result: the worker stores a call's
// progress before it publishes its result (internal/worker), the Watch
// sends every stored event before FINISHED, and the answer is written
// once the relay has sent FINISHED (bounded by progressDrain). A PROGRESS
// event with partial output (tool.Partial) is a notification like any
// other, in the same order: the text of its text blocks as the message,
// and in _meta MetaPartial its number, attempt and blocks (partial.go;
// docs/mcp.md, "Partial output", shows one, checked by a test). A
// request's progress only increases (MCP requires it): each is
// max(previous+1, the tool's percentage), so percentages and chunks mixed
// never send it back. The relay reads through Watch, which drops a chunk
// already sent (dispatch.PartialSeen).
//
// # Client profiles
//
// tools/list, tools/call and the results and input requests tasks/get
// inlines are rendered for the client that asks, at the edge (profile.go;
// internal/profiles): the `_meta` keys its profile does not pass are left
// out (the tool's in tools/list, the result's, each block's, an input
// request's params' and its sampling messages'; a tool whose `_meta` is
// not an object is listed without it, logged once per version and
// profile), the content it cannot show (toolwire's link to a cut result
// too) is
// replaced by its fallback, and the widget meta is generated from the
// tool's spec (ui_template as openai/outputTemplate for ChatGPT). Tools
// never see the client. Nothing of a client is kept between requests, so
// it is identified on each: the ProfileHeader names a configured profile
// (any other name is invalid params); else the clientInfo and
// capabilities a client of the stateless revision puts in every request's
// _meta are matched against the profiles (Config.Profiles, first match
// wins); else — a client of an older revision, whose clientInfo only its
// initialize request carries, to a replica that keeps nothing — the
// default profile. Such a client is named with the header in its
// configuration. What a client declares is bounded before it is matched:
// its name cut (profiles.ClientName; a longer name matches no name rule),
// at most profiles.MaxCapabilities capabilities and extensions (more: none
// considered); the fast path decodes only the two keys it reads. Tool
// forms are cached per version and profile. The fast
// path matches the profile itself, takes a header naming a configured
// profile, and leaves one naming none to the SDK, which refuses it.
//
// # Cancelling
//
// A notifications/cancelled sent as a POST of its own, on any revision
// and to any replica, ends the tools/call it names as a closed stream
// does (cancelled.go), with its reason (ClientCancelled). The endpoint is
// stateless and no session scopes a request id: each replica keeps the
// tools/call requests it serves (inflight: at most maxInflight, each
// until it is answered) by caller — tenant and agent of the credential —
// and request id; a notification of a request this replica does not
// serve is passed to the others on Config.Bus (cancelSubject), each of
// which looks it up in its own. Only the caller's requests are reached. A
// replica serving two of the caller's requests under one id cancels
// neither; a notification that arrives after its request ended, while
// another client of the same credential has a request of that id in
// flight, cancels that one; in open access every caller is the same
// identity (documented in docs/mcp.md). Only dispatchers may publish on
// cancelSubject, but an operator may make a push consumer on CALLS (a
// scan slot) delivering what it stored there: a replica takes only
// messages without a reply (a delivery carries a $JS.ACK reply; its
// notices are published with none), as the other dispatcher services do,
// and only notices signed by a dispatcher's key (signing.KindMCPCancel).
// A reason is cut to maxReason bytes at a character's boundary. A tool's _meta that is no object is dropped, and a tool cannot
// set toolwire's own keys in it.
//
// Where the issue was silent: an embedding program may add prompts,
// resources and completions of its own (Config.Extra; the conformance
// suite's fixtures are added so), served by the SDK on each replica, never
// tools; results of tools/call carry resultType "complete" for clients of
// the stateless revision, as the SDK marks the results of tools it runs.
// The Extra's prompts and resources are declared without listChanged: the
// set is fixed, the same on every replica. Without an Extra no prompts
// capability is declared, and prompts/list and prompts/get are method not
// found (the SDK would answer them empty): what is declared is what is
// served. The conformance suite runs against both: with the fixtures as
// an Extra (TestConformance, no expected failure) and as the dispatcher
// binary builds the endpoint (TestConformanceProductionConfig, through
// dispatchd.Run), whose expected failures may name only scenarios of
// features not declared, plus the reads of the suite's fixture resources
// (resources are declared for cut outputs, which no fixture URI names);
// the test checks every failed check of them against the capabilities
// declared.
//
// A request of the stateless revision whose Mcp-Name header is missing or
// does not name what its body does is answered HTTP 400 with -32020 on
// every method: the SDK checks tools/call, resources/read and prompts/get,
// and taskHeaders the tasks methods, which the SDK does not know (task
// keeps a check of its own for what reaches it otherwise).
//
// # Fast path
//
// A plain tools/call of the stateless revision (one request per POST, no
// progress token, no answers to a request for input, no Tasks extension,
// headers that match the body, each JSON object's keys exactly ones it
// knows, client capabilities and info the SDK would take; the profile its
// ProfileHeader names and the model its ModelHeader or _meta names, as
// the SDK path takes them) is answered by fast.go without the SDK: parsed
// once, waited for in dispatch.Call, written as one JSON response, with
// the result, error and status the SDK path gives it
// (TestFastPathAnswersAsTheSDK, TestFastPathAnswersAsTheSDKForAModel), at
// less than half its CPU.
// Anything else is the SDK's, which answers it, errors included.
//
// # Confirming an ask
//
// A call the policy parks, whose caller may confirm it (token keys held,
// the confirm scope), is put to a stateless client that declared
// elicitation as an input-required result asking its user; the
// requestState is the approval token, and the user's approval runs the
// exact call the token binds, a refusal cancels it (confirm.go).
//
// # Large results
//
// A result cut to its inline limits ends with a resource_link to its whole
// output text (output.go), toolwire://calls/<id>/output, read with
// resources/read on any replica through dispatch.GetOutput, 1 MiB a page,
// the next page named in _meta. The resources capability is declared for
// it; no such resource is listed.
//
// # Tools that ask for input
//
// A tool's input-required answer (tool.NeedInput) is an input-required
// result (SEP-2322) whose requestState is "toolwire-input." and the
// asking call's id: the tool's state stays in the results stream, and the
// client's retry is a call that continues the asking one
// (CallRequest.continues), checked by the dispatcher (internal/dispatch,
// input.go) against the stored response — tenant, tool, arguments, age.
// That is the integrity protection the protocol asks of request state,
// without a key to share between replicas: nothing the client holds is
// trusted. A requestState that is not ours, or that the dispatcher
// refuses, is invalid params (-32602); a tool asking for what the
// client's declared capabilities (request _meta) do not cover is -32021
// naming them. Clients of older revisions get an error naming 2026-07-28:
// their input would come back on a request that may reach another replica.
// docs/mcp.md, "Tools that ask for input".
//
// # Tasks
//
// The Tasks extension (tasks.go) runs on toolwire's calls: a tools/call of
// a stateless client that declared the extension waits Config.TaskAfter
// for the result and then answers a task whose id is the call id. The
// task's record (tasks bucket, key tenant.id, compare-and-set) names the
// call it is at and the answers given; tasks/get reads the record and the
// call's state on any replica; tasks/update adds answers, and once every
// request of the call it is at has one, the answering call is submitted
// with the asking call's id as its idempotency key, so that replicas
// racing on it submit one. The answering call is made for the session
// and the model of the tools/call that created the task (kept in the
// record: taskRecord.Session, Model), never for what a tasks/update
// names, so every round is admitted under the same session mode and
// toolset. A task without a record (expired, or another
// tenant's: the tenant is in the key) is unknown (-32602), and so is a
// task whose call the caller may not see (another agent's, under the
// dispatcher's AgentVisibility own: its GetResult answers UNKNOWN),
// checked on every tasks method before anything is changed or a call
// submitted — tasks/get too, when the record has the answers of the next
// call fixed and that call not submitted yet (and the dispatcher's
// CallArguments answers another agent's call as not stored).
//
// A task's record holds no secret argument. When the tool's schema marks
// an argument secret, the record keeps the arguments as ShownArguments
// shows them (those fields "[REDACTED]", taskRecord.Redacted set), and the
// answering call is submitted with the arguments as admitted, read back
// from the stored call the task is at (Core.CallArguments: its approval if
// it was parked, else the calls stream): neither kept in memory nor
// encrypted, so any replica submits it, and no key is shared. The calls
// stream and the approvals bucket hold them in clear already (they run
// the call); the tasks bucket does not add a copy. Reading them back costs
// one scan of the tenant's calls of that tool from a minute before the
// call's id time, once per answered round; a tool without secret
// arguments keeps its arguments in the record and costs nothing. The
// answers a user gives (inputResponses) are kept as given: no schema marks
// them secret. Where the
// extension was silent: a call parked for approval is "working" with a
// statusMessage, toolwire's own failures (INTERNAL) are "failed", a
// tool's are "completed" with isError; no notifications/tasks are sent.
//
// # Skills
//
// MCP's Skills extension (SEP-2640, skills.go) is declared always, with
// the resources capability it needs: a worker may announce skills at any
// time. skills/list and skills/get answer from the `skill` tool's
// registry entry, for the caller (dispatch.SkillsFor: the tool visible to
// it, less the skills whose load the policy denies it), on one page (a
// `skill` tool serves at most 64), cacheScope private. resources/read of
// a skill:// file is a call of `skill` through admission, in the
// request's session and for its model; its answer is served only when it
// is the file the manifest lists (URI, size, SHA-256). A read the policy
// asks about is withdrawn and answered an error (a read cannot wait for a
// person). resources/list adds the listed skills' SKILL.md on its first
// page. resources/directory/read (declared: directoryRead) lists a
// listed skill's directory from its manifest: files with their media type
// and size, subdirectories as inode/directory, on one page; a URI that is
// not such a directory is -32602.
//
// # Auth
//
// Callers present the dispatcher's API keys as bearer tokens; a missing or
// unknown key is answered 401 with a WWW-Authenticate challenge naming the
// protected resource metadata (RFC 9728, served at MetadataPath; its
// address is Config.PublicURL's when set). A tools/call naming in its
// Mcp-Name header a tool whose scopes the key lacks is answered 403
// insufficient_scope with the missing scopes (scoped). A
// request with an Origin header that is neither the endpoint's own origin
// nor an allowed one is refused 403, and the SDK refuses a loopback
// listener reached under a name that is not loopback (DNS rebinding).
// Without API keys (open access) a Host that is a name — not an IP
// address, localhost or an allowed origin's host — is refused too, on any
// listener: a rebound page sends its own name as Host and Origin. The
// client's token authenticates it here and goes nowhere else: no tool,
// worker or MCP server behind the fleet sees it.
package mcpserver
