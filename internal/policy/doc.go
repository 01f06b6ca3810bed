// Package policy decides who may run what: policy documents (rules in
// layers, with globs and CEL conditions), the decision of DESIGN §6 (deny
// wins, then ask unless a grant or approval covers the call, then allow),
// its explanation, grants and approval bindings, and the canonical form of
// arguments that approvals and the loop guard hash. Both sides of a call
// use it: the dispatcher at admission (after schema validation), and the
// worker again before executing, since a call can reach a pool without
// passing a dispatcher (a raw NATS publish).
//
// The package is pure: no I/O, no goroutines, no clock but Input.Now. A
// Policy is immutable and safe for concurrent use; storing documents,
// watching them, parking calls and consuming approvals belong to its
// callers.
//
// # Policy documents
//
// A document is YAML. One file holds the tenant layer, the agent layers
// (one per agent identity) and the document's own tests:
//
//	tenant:                       # the operator's layer; applies to every caller
//	  default: deny               # allow | ask | deny; optional
//	  rules:
//	    - id: builtins            # required, unique in the whole document
//	      effect: allow           # required: allow | ask | deny
//	      tools: [echo, fs_*]     # required: tool name globs ("*" = every tool)
//	    - id: no-etc
//	      effect: deny
//	      tools: [fs_*]
//	      args: {path: "/etc/**", repo.owner: "acme-*"}   # optional argument globs
//	      when: tool.annotations.destructive              # optional CEL condition
//	      reason: system files are off limits             # optional; what callers see
//	agents:
//	  support-bot:                # an agent identity: this layer applies to its calls
//	    default: ask
//	    rules: [...]
//	modes:
//	  voice:                      # a session mode: this layer applies to the calls of sessions in it
//	    default: allow            # (caller.mode, set by the dispatcher from the session's state)
//	    rules: [...]
//	    sessions:                 # optional, in any layer (sessions.go)
//	      pin_versions: true      # lock spec versions per session for these calls; any layer turns it on
//	tests:                        # run before an apply is accepted (RunTests)
//	  - name: etc is off limits   # optional
//	    tool: fs_read             # required
//	    args: {path: /etc/passwd} # optional, default {}
//	    caller: {tenant: acme, agent: support-bot, session: s1}   # optional; also user, run, turn, scopes, mode, parent, parent_call_id, root_call_id, depth, model, model_family
//	    annotations: {read_only: true}                            # optional overrides of the tool's spec
//	    requires_approval: false                                  # optional override
//	    expect: deny              # required: allow | ask | deny
//
// Parse is strict, and one refusal (*InvalidError, errors.Is ErrInvalid)
// names every problem with its line and field: an unknown or repeated
// field, a value of the wrong type, a rule without id, effect or tools, an
// empty tools list, a duplicate rule id (ids are unique across all layers,
// so an id alone names a rule in an audit record; they are 1–128 of
// letters, digits and _ . : / -), a bad glob or field path, a `when` that
// does not parse, does not type-check or is not a bool (reported at the
// condition's line; inside a literal block, |, at the line of the error).
// The document is at most MaxDocumentBytes (1 MiB), checked before it is
// parsed; it is one YAML document; aliases (*x) are refused, so a small
// file cannot expand into a large one. Scalars follow YAML 1.2
// (go.yaml.in/yaml/v3): only true and false are booleans, so yes, no, on,
// off, y and n are strings (a tool may be named "on"); an argument value
// in a test may use 0x, 0o, 0b and _ in numbers, never .inf or .nan.
//
// A Policy has a version, "sha256:" and the hex SHA-256 of its canonical
// form (Canonical): the document's fields as canonical JSON (keys sorted,
// unset and empty fields left out, lists in document order). Key order,
// spacing, comments, quoting and flow or block style do not change it; a
// rule, a reason, a test or the order of rules or tests does (the order
// has no effect on decisions, but a reordered file is another file).
// Storing the source text keeps the comments for `show` and `diff`.
//
// A layer's sessions: section (sessions.go) says what the dispatcher does
// with the sessions of the calls it applies to: pin_versions locks the
// spec versions a session runs (PinsVersions: on when any applicable
// layer turns it on; false is the default and turns nothing off).
//
// Besides its layers and tests, a document has sections of its own,
// which only whoever applies it can change: model_families and toolsets
// (toolsets.go; "Toolsets" below), limits (limits.go), loop_guard
// (loopguard.go), hooks (hooks.go) and latency_budgets
// (latencybudgets.go: soft budgets per tool glob, category and session
// mode; LatencyBudgetFor gives the tightest that applies to a call, the
// spec's own timeouts.latency_budget included; an entry naming a mode
// applies only to the calls of sessions in that mode: the dispatcher
// passes the call's caller.mode).
//
// # Session rules
//
// The document's sessions: section (sessions.go; Policy.Sessions,
// SessionRules) says what a call's session must be, for the dispatcher to
// enforce at admission (internal/dispatch, "Sessions"): a session is
// named by its caller, not bound to its credentials, so without these an
// agent could escape a restricted or ended session by naming none, or a
// fresh one.
//
//	sessions:
//	  required: true        # a call naming no session is refused PERMISSION_DENIED
//	  opened_only: true     # a session nobody opened is refused SESSION_INACTIVE
//	  default_mode: voice   # the mode of calls whose session has none, and of calls without one
//
// Every field is optional and off when left out; unknown fields are
// refused like everywhere else; default_mode names a mode the document
// declares under modes: (else the document is refused). An empty
// section is no section (the same version). SessionRules.ModeOf gives the
// mode a call is decided in: its session's, else default_mode. RunTests
// decides a test whose caller names no mode in default_mode, as
// admission would. Decide itself reads caller.mode only: the dispatcher
// sets it. The section is the document's own, like loop_guard: a
// tenant's document replaces the installation's whole, sessions included.
//
// # Toolsets
//
// toolsets.go; docs/toolsets.md. A request may name the model it is for;
// ModelFamily gives its family: the first model_families entry (a list:
// family and model name globs) matching the whole name, else
// DefaultModelFamily (the leading letters of the name after its last
// '/', lowercased: gpt-5.1 is gpt, claude-sonnet-4-5 claude). A
// family's Toolset hides tools (name globs), substitutes one tool for
// another (substitute: {edit: apply_patch}: the family is offered
// apply_patch, never edit) and offers schema variants (variants: {tool:
// {input_schema: ...}}, compiled here: draft 2020-12, no remote
// references). The dispatcher lists what Offered allows, with View's
// schema, and refuses a call of a tool not offered (the reason names the
// toolset) or whose arguments fail the variant, after they passed the
// tool's own schema: a call satisfies both, so a variant that is not a
// narrowing offers what the tool refuses and never widens the tool. A
// toolset only takes away; Decide does not read toolsets (the rules see
// caller.model_family), and neither do a document's tests. Parse refuses
// a toolset that cannot be applied: a substitution of a tool by itself,
// by a tool the toolset hides, or chained (a tool both substituted and
// offered instead); a variant of a tool not offered; a schema that does
// not compile; a substitute or variant given twice; an empty family. The
// entry counts are capped at parse time (MaxModelFamilies model_families
// entries and toolsets, MaxToolsetEntries model globs per entry and hide
// globs, substitutes and variants per toolset): a model's family is found
// by scanning the globs and a list matches each tool against the hide
// globs, with no cache, so the bound is the count (decided after review;
// a per-name cache was the alternative). Both sections are in the
// canonical form.
//
// # The decision
//
// Decide takes the tool's spec (name, version, category, annotations,
// requires_approval), the parsed arguments, the caller, and the grants and
// approval that may apply. The layers that apply to a call are the tenant
// layer, the layer of the caller's agent (when the document has one) and
// the layer of the caller's mode (caller.mode, when the document declares
// it under modes:; a mode name is ModeNameRE). A mode layer composes like
// the others (deny wins, the most restrictive verdict wins), so a mode
// narrows and never widens. Decision.ModeRestricted says whether the
// outcome is the mode's — a mode rule's deny, or the mode's default deny,
// with no tenant or agent deny first — which the dispatcher answers
// MODE_RESTRICTED rather than PERMISSION_DENIED. Hidden hides, in a mode,
// what that mode's layer denies outright. Grants never live in a mode.
//
//  1. Deny wins: a matching deny rule in any applicable layer denies.
//     Nothing covers a deny: not a grant, not an approval.
//  2. Each applicable layer then gives its verdict: ask when one of its
//     ask rules matches, else allow when one of its allow rules matches,
//     else its default (a layer without default gives none). The most
//     restrictive verdict wins (deny > ask > allow). So a layer's default
//     applies to the calls none of its own rules match, and an agent layer
//     can narrow what the tenant layer permits but never widen it: under
//     a tenant `default: deny`, an agent's allow rule allows nothing the
//     tenant layer does not also allow.
//  3. A tool whose spec says requires_approval asks, whatever the rules
//     say (deny still wins).
//  4. An ask becomes allow when the approval presented checks out for this
//     exact call (Approval.Check), or else a grant covers it (Grant.Covers;
//     the narrowest layer wins, then the smallest id).
//  5. Otherwise, allow. With no policy at all (a nil *Policy) every call is
//     allowed, as before this package decided anything, but for tools that
//     require approval, which ask.
//
// Rules are kept sorted by id and evaluated in a fixed order (layer, then
// effect deny, ask, allow, then id), so neither the outcome nor anything
// else in the Decision depends on the order of rules in the document or
// of the grants given. Decision.Matched lists the rules that matched: when
// a deny rule matched, the deny rules only (the rest cannot change the
// outcome and are not evaluated); otherwise the ask rules and, in layers
// without a matching ask rule, the allow rules. Decision.Rule is the one
// that decided (the first matched with the outcome's effect; the ask rule
// when a grant or approval covered it), Decision.Default the layer whose
// default decided, Decision.RequiresApproval whether the spec asked.
//
// What to record and answer: an audit record keeps Decision.Version and
// Decision.RuleID (with Default and RequiresApproval when no rule
// decided). A refused or asked caller is told Decision.Reason: the
// deciding rule's `reason`, or its id when it has none, never a rule's
// text (tools, args, when), which may be private.
//
// ListTools hides a tool from a caller (Hidden) when an applicable layer
// denies every call of it whatever the arguments: a deny rule with
// neither args nor when names it, or the layer's default is deny and none
// of the layer's rules names it. A tool denied only for some arguments,
// some callers or under a condition stays listed.
//
// Explain decides like Decide and says why, for administrators: the
// applicable layers and their defaults, and every rule that names the
// tool with whether it matched and why (the argument values against the
// patterns, the condition's value or its error). It shows rule text and
// argument values: it is for the admin-scoped Explain RPC, never for the
// caller of a call.
//
// # Globs
//
// Tool names and argument values are matched by globs, on the whole
// string, case-sensitively, character by character (UTF-8):
//
//	glob   matches
//	*      any run of characters except '/', possibly empty
//	**     any run of characters including '/', possibly empty (*** is **)
//	?      one character except '/'
//	[abc]  one character of the class; ranges [a-z]; [!abc] or [^abc]
//	       negate; a class never matches '/'; \ escapes inside a class
//	\c     the character c itself: \*, \?, \[, \\
//
// These are path.Match's rules plus **, which may appear anywhere
// ("**/.ssh/**", "**.pem", "a**b"). A pattern that ends in "/**" also
// matches the part before it: "/etc/**" matches "/etc", "/etc/" and
// "/etc/passwd" but not "/etcx". There are no braces or extended globs. A
// pattern is at most 1024 bytes and 256 characters and wildcards, and
// matching is linear in the string (an automaton, no backtracking), so no
// argument can make a glob slow. Tool names have no '/', so there * and **
// are the same.
//
// # Argument patterns
//
// `args` maps a field path to a pattern. A path is field names joined by
// dots ("repo.owner"); a field whose name holds a dot cannot be reached
// (use CEL: args["a.b"]). Walking the path, an array fans out to its
// elements, at any step and at the end ("files.path" reaches the path of
// every element of files). A pattern is a string glob, which matches
// string values only, or a YAML number, true, false or null, which
// matches that exact JSON value (numbers by value: 2 matches 2.0). An
// object never matches. Every entry of `args` must match for the rule to.
//
// Patterns read differently by effect, so that each fails closed:
//
//   - deny and ask rules match when some value at the path matches (one
//     bad path among many is enough); a missing field does not match;
//   - allow rules, and grants, match only when there is at least one value
//     and every value matches (one path outside the pattern keeps the
//     call out), and a string with a ".." path segment never matches an
//     allow glob: "/tmp/**" does not allow "/tmp/../etc/passwd".
//
// Globs compare strings as sent; they do not resolve paths, so a deny on
// "/etc/**" does not catch "//etc/passwd" or "/tmp/../etc/passwd". For
// path arguments, allow a safe prefix rather than deny a dangerous one,
// and let the tool's schema or its sandbox refuse what no glob can see.
//
// # CEL conditions
//
// `when` is a CEL expression (cel.dev/cel-go v0.32.0, the module that
// github.com/google/cel-go v0.32.0 declares itself to be) that must
// type-check to bool; a dynamic value must be compared (args.force ==
// true, not args.force). Its variables:
//
//	args    map(string, dyn): the call's arguments (ParseArgs: whole numbers
//	        are int, others double; ints and doubles compare with each other)
//	caller  tenant, agent, session, user, run, turn, mode (strings), scopes
//	        (list), and the delegation chain the dispatcher checked
//	        (docs/delegation.md): parent (the parent call's tool),
//	        parent_call_id, root_call_id (strings, "" without a parent)
//	        and depth (int, 0 without a parent). A sub-agent's scope is a
//	        deny rule on caller.parent: the chain needs no mechanism of
//	        its own in the policy. It binds cooperating callers only:
//	        parent_call_id comes from the request, and a caller that
//	        leaves it out is judged as its agent's own call; a sub-agent
//	        to be confined whatever it sends gets a key of its own agent
//	        (a rule on caller.agent). model and model_family (strings, ""
//	        when not given): the model the request says it is for and
//	        the family the dispatcher derived (ModelFamily) — a claim of
//	        the agent service, so a rule on them narrows for cooperating
//	        callers and never stands in for an identity.
//	tool    name, version, category ("retrieval", "action", "utility" or
//	        ""), executor ("native", "mcp", "sandbox", "http"), provider,
//	        scopes, and annotations: read_only, destructive, idempotent,
//	        open_world, requires_approval (bools; unset hints take MCP's
//	        defaults: destructive and open_world true, read_only and
//	        idempotent false; a read-only tool is never destructive)
//
// caller and tool are typed objects: a misspelt field does not compile. The
// standard library, cel-go's strings extension (lowerAscii, split,
// replace, ...) and sets extension (sets.contains, sets.intersects) are
// available; there is no clock and no I/O, so a condition decides the
// same on every replica. An optional field is tested with has():
// has(args.force) && args.force == true.
//
// Each condition is compiled once, when the document is parsed, and its
// evaluation is bounded by CostLimit (20 000 of CEL's cost units). A
// condition that cannot be evaluated — it hits the cost limit, reads a key
// the arguments do not have, applies an operator to the wrong type — fails
// closed: a deny or ask rule counts as matching, an allow rule as not
// matching; the decision lists the rule and the error in Decision.Errors
// (and Explain says "treated as matching (fail closed)"). So write
// has(args.x) for optional fields. Evaluating with cost tracking triples a
// condition's time, so each condition also has an untracked program,
// used only when CEL's static cost estimate, made at compile time for
// inputs up to a size (128 B to 64 KiB), proves the limit out of reach
// and every string, list and map the call offers the condition is within
// that size; otherwise the tracked program runs. Both give the same
// answer whenever the limit is not reached. A nested loop over the
// arguments is always tracked.
//
// # Grants and approvals
//
// A Grant is a standing approval ("approve for the session / agent /
// tenant"): layer, tenant (always), agent and session as the layer needs
// (a session grant may also name the agent), a tool glob, optional
// argument globs (read as an allow rule's: every value must match) and an
// optional expiry. It covers an ask, never a deny. Decide reads grants
// from Input.Grants (a GrantSource) only when its outcome would otherwise
// be ask, and checks each one itself, so a source may return more grants
// than apply.
//
// An Approval is one approved call: it binds tenant, agent, session,
// tool, spec version and the SHA-256 of the canonical arguments, and
// expires (an approval without expiry is expired). Check and CheckCall
// (the worker's re-check) refuse another caller, tool, version or
// arguments (ErrApprovalMismatch) and a passed expiry
// (ErrApprovalExpired). Single use is not the engine's part: when
// Decision.Approval is set, the caller consumes its Nonce (a KV create)
// before publishing, and refuses the call if the nonce was used.
//
// # Canonical arguments
//
// Args are a call's arguments as every decision sees them, a view of one
// text parsed by the one JSON reader (internal/jsonvalue, whose doc.go
// gives the rules and the canonical form): ParseArgs parses the text,
// ArgsFrom takes a *jsonvalue.Doc parsed already (registry.CheckedArgs
// returns the Doc of arguments that passed the schema), so that admission
// reads the arguments once. The forms a decision uses are derived from the
// Doc when first asked for, once: the value (Value, for globs and CEL;
// numbers int64 when whole and in range, else float64), the canonical JSON
// (Canonical) and its SHA-256 (SHA256, Hash: approval bindings, the loop
// guard). The canonical form has no insignificant white space, members
// sorted by key, and numbers as the decimal they denote (1, 1.0, 1e0 and
// 10E-1 are all 1), never rounded through a float64: 9007199254740993 and
// 9007199254740992 differ, so an approval for one does not cover the
// other. The reader is stricter than encoding/json where encoding/json
// would make two different texts one value, or one text two values: it
// refuses duplicate keys, invalid UTF-8 and unpaired surrogate escapes
// (the dispatcher answers those VALIDATION), nesting deeper than
// MaxArgsDepth and exponents beyond nine digits (the Err variables).
// ParseArgs reads empty input as {} and refuses a value other than an
// object (ErrNotObject). FuzzCanonical holds the canonical form to
// encoding/json.
//
// # Tests
//
// RunTests decides each of the document's tests and returns a
// *TestsError (errors.Is ErrTestsFailed) naming every failed test by
// index, name and line with the tool, the expected and the actual outcome
// and what decided it; an apply must refuse such a document. A test's
// tool spec is the registry's (RunTests' lookup) when given, else a bare
// spec with only the name (so MCP's default annotations: destructive);
// the test's annotations and requires_approval override either. Tests
// run with no grant and no approval at a fixed time.
//
// # Cost
//
// BenchmarkDecide (2-core Xeon, go test -bench BenchmarkDecide): with no
// policy Decide takes about 13 ns and allocates nothing; with the 50-rule
// benchmark policy (20 rules applying to every tool, half with argument
// globs and half with CEL conditions, 30 naming tools by glob; the call
// evaluates 15 conditions and 10 argument globs) about 4.4 µs and 53
// allocations (2.7 µs a call with two goroutines deciding); ParseArgs of
// a 103-byte argument object (the parse: the value, the canonical text and
// its hash are derived when first asked for) less than half of the 1.6 µs
// it took when it built all three in its own pass, and all three together
// about that (BenchmarkArgs); a Hidden check about 35 ns. A
// condition stopped by the cost limit takes about 2.6 ms: that is the most
// one rule can add to an admission.
// Candidate rules per tool name are cached per layer (copy-on-write, no
// lock on the read path) for up to 4096 names.
//
// # Where approvals live
//
// The engine only checks bindings. Parking asked calls, approving and
// denying them, storing grants, issuing and verifying tokens and marking
// nonces used belong to internal/approvals (the store, over the
// approvals bucket) and internal/dispatch (the flow); the worker's
// re-check before executing is approvals.CheckCall, which reads the
// approval record or grant a call names and checks it with
// Approval.CheckCall and Grant.Covers.
package policy
