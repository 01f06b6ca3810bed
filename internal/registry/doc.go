// Package registry holds tool specs: it validates them, versions them by
// content hash, publishes them into the registry KV bucket, keeps a live,
// watched copy for dispatchers, compiles their input schemas once per schema
// hash, and renders them in the LLM providers' formats.
//
// # Layout in the bucket
//
// Key `<tool>` holds the current ToolSpec (binary protobuf) and key
// `versions.<tool>.<version>` every version ever published, so a call can
// pin an older version and a worker can tell a stale version from an
// unknown one. A version key deleted or purged is forgotten by every
// Store (its watch), so a call pinning that version is NOT_FOUND. Workers announce the specs they serve at start-up and the
// current key is written only when the version (or the disabled state)
// changed, so restarts do not churn the bucket.
// Keys `approvals.<tool>` hold approved MCP definition hashes and keys
// `sources.<tool>` the Source of each tool; the Store ignores both.
//
// # Sources: one definition per name
//
// A tool's definition source is the worker pool that serves it, named by
// the pool (bus.PoolConfig.Name, the durable consumer every replica of the
// pool shares), recorded as a Source (pool, the subject filter it serves
// the tool on, and the worker that wrote it) under `sources.<tool>`.
// Before a live worker extends its consumer or publishes a spec it claims
// the name (Claim, through its Registrar): a name nobody claimed is its pool's (Create: of two
// pools starting at once, one wins); a name its own pool holds stays its
// pool's whatever the version, so replicas and rolling upgrades publish
// freely; a name another pool holds is refused with a *ClaimError
// (ErrClaimed) naming both, which stops the worker at start-up, unless the
// spec is the registry's current definition (nothing would change) or the
// holder no longer serves it: its pool's consumer is gone or no longer
// filters the holder's subject (an operator retired the tool from that
// pool), never within ClaimGrace (30s) of the claim, while the holder may
// still be creating its consumer, and only once it has not served it for
// ClaimGrace: the first claim that finds it not serving records the time
// (Source.MissingSince) and is refused, and the record is forgotten when
// the holder claims again or has its consumer made (ServingAgain), or
// when the claim that wrote it finds, looking once more after writing,
// that the holder serves again (its consumer put back meanwhile), so
// that no pool wins another's tools in the seconds its consumer is being
// put back. Then the claimant takes the name over.
// Shadow workers claim nothing: they publish versions only. Tools
// registered before sources were recorded have none; the first pool to
// publish one after the upgrade claims it. Before, two pools publishing
// one name replaced each other's spec silently, last writer wins.
//
// # Announcements: only dispatchers write
//
// Workers never write the bucket (their NATS credential may not put,
// delete, roll up or purge it). A worker announces (Announcement, one
// per spec, JSON) a claim (OpClaim), a spec (OpPublish: claim, then
// write), a shadow pool's version (OpVersions), the first approval of
// an MCP tool's definition (OpApprove) or a request for its pool's
// consumer (OpEnsure, below) for one of its pools, through a Writer: a
// Remote in a worker process, a request on its pool's subject
// (bus.PoolRegistrySubject: <RegistrySubject>.<pool>) that every
// dispatcher serves in one queue group (Service, started by
// internal/dispatch), asked again with backoff while no dispatcher
// answers; a dispatcher's in-process workers call its Registrar
// directly. A pool's NATS role (bus.PoolRole) may publish on its own
// pools' subjects only, and the Service refuses an announcement whose
// body names another pool than its subject. The Service also answers the
// bare RegistrySubject, where workers of the release before announce,
// with a refusal naming the upgrade (OlderWorker; for one release); a
// Remote unanswered for DefaultNoAnswerHint logs that the dispatchers may
// be older than the worker (upgrade the dispatchers first, then the
// pools). The Registrar checks each
// announcement before it writes anything:
//
//   - the pool's name fits its type (bus.CheckPoolName: a pool named
//     <x>-<type> is pool x's <type> part and runs <type> tools only);
//   - the spec decodes and passes Check;
//   - its executor type is the pool's, and the pool's consumer, if it
//     exists, filters calls of that type only;
//   - its version, if set, is Version of its content: the version is
//     recomputed, never taken from the worker, so a changed description
//     (or any change) under a version already registered is refused
//     (*RefusedError, ErrRefused) and the bucket stays as it was. A
//     version key found holding other content is rewritten with the
//     content of its version, and logged;
//   - a claim follows Claim's rules (*ClaimError, ErrClaimed), with the
//     source's subject computed from the spec;
//   - an approval comes from an MCP pool, for a tool no other pool holds,
//     and never replaces one recorded (ApproveFirst);
//   - a consumer request (OpEnsure, ensure.go) names at least one
//     subject, each the call subject of one tool of the pool's type whose
//     registry source is this pool on that very subject (the worker
//     claims before it asks), or, for a shadow pool, the replay subject
//     of one tool of its type that has a source: a pool the request's
//     signing key is enrolled for or trusted for (--worker-keys; the
//     local worker key is trusted for every pool, which is how a shadow
//     worker replays the dispatcher's in-process tools), never the
//     shadow pool itself (a shadow pool has a name of its own, default
//     shadow-<type>, never a live pool's); replays carry the original
//     calls' arguments: no pool reads another's; no wildcard but the
//     tenant's. A pool's consumer is live or shadow, never both
//     (bus.ErrPoolKind): a request of the other kind than the existing
//     consumer is refused, and the filters an existing shadow consumer
//     already has must pass the same check for the request's key (whoever
//     joins a shadow pool fetches all its replays). The
//     Registrar then runs bus.EnsurePool with the pool's settings and
//     answers the consumer's name (Announced.Consumer); an overlap with
//     another pool is refused. Workers never create consumers: a
//     create's filters and deliver subject travel in its body, which NATS
//     permissions cannot see.
//
// Every announcement is signed by the key it names, enrolled (or
// trusted) for its pool (enrol.go). With a pool's role the pool is also
// bound by NATS permissions (the subject); with the any-pool worker role
// (bus.RoleWorker) it is the worker's word: such a worker can register
// a new version of a tool, or ask for the consumer, of any pool whose
// key it holds.
//
// # Versions
//
// A version is the hex SHA-256 of the deterministic protobuf encoding of
// the spec with its version and disabled fields cleared: any change of
// schema, description, timeouts or executor config is a new version.
//
// # Arguments
//
// CheckArgs is the one check of a call's arguments: the dispatcher runs it
// at admission, and the worker again (a call can be published around the
// dispatcher). It applies the size and nesting limits (the spec's
// Limits, else the caller's ArgLimits), the count of members and
// elements (when ArgLimits.MaxValues is set: the dispatcher's
// MaxArgsValues) to the text, then reads it with the one JSON reader
// (internal/jsonvalue: duplicate keys, invalid strings, numbers out of
// range and nesting beyond 512 are refused, ParseViolation) and checks
// the input schema (ValidateArgs), and answers a VALIDATION
// pre-execution error (internal/envelope) listing at most MaxViolations
// violations. CheckedArgs is the same check returning the parsed
// arguments (a *jsonvalue.Doc) for the steps after it (policy.ArgsFrom),
// and CheckArgsParsed the check of a Doc parsed elsewhere.
package registry
