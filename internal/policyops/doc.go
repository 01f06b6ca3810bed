// Package policyops does the work of the policy RPCs: apply, remove, show
// and list a tenant's policy documents (internal/policystore), and explain
// a decision (internal/policy). The API's Connect handlers
// (internal/api, policies.go) only translate: they take the
// caller's identity from the request's context, call one method of Ops
// and map its error to a Connect code. It does not import the dispatcher:
// it reads the policy in force through Policies, the registry through
// Specs and approvals through Approvals.
//
// # The operations
//
// Every one needs the "admin" scope (identity.AdminScope; ErrNotAdmin,
// permission_denied, naming what needed it) and acts on the caller's
// tenant, from its credentials, never from the request:
//
//   - Apply parses the document (at most policy.MaxDocumentBytes,
//     checked before parsing: ErrBadRequest), compiles its conditions and
//     runs its tests against the registry's current specs, and refuses
//     (policy.ErrInvalid, policy.ErrTestsFailed: invalid_argument) naming
//     each problem's line; else it stores it (policystore) and returns
//     once it is in force on this replica (at most Config.Wait, 5 s; the
//     other replicas follow within about a second). A dry run only
//     checks. Over the API a document travels in the request body, so
//     the dispatcher's --max-request-bytes (default 320 KiB) bounds it
//     first: a larger one is refused with resource_exhausted while read;
//     raise the flag to apply documents up to 1 MiB. Without
//     Config.Policies Apply refuses (ErrNoPolicySource,
//     failed_precondition): it would store a document nothing here
//     enforces.
//   - Remove takes the tenant's own document out of force (it falls back
//     to the installation document, which Removed names) and returns once
//     this replica has the removal in force (at most Config.Wait).
//   - Document returns the document in force as applied (comments kept),
//     or one version; Versions the applies, newest first (20 unless asked,
//     at most policystore.HistoryDepth). A tenant without a document of
//     its own gets the installation's (Version.Scope the installation:
//     PolicyVersion.tenant "*").
//   - Explain decides a call as admission would, without validating or
//     running it, on behalf of the request's agent (default the caller's
//     own, with its scopes), session, user and run in the caller's tenant,
//     in the request's mode (caller.mode; one the policy declares, else
//     ErrBadRequest; never read from the session; none given, the
//     policy's sessions.default_mode, as admission decides), and says
//     what the policy's session rules do to the call (Explanation.
//     Sessions: a call naming no session under sessions.required is
//     refused before the rules decide),
//     with the policy in force or another version, and says why: the
//     applicable layers, every rule naming the tool with its layer,
//     effect, line, whether it matched and why (argument values against
//     patterns, a condition's value or error), the grant that covered an
//     ask, and why a named approval binds nothing. Arguments ParseArgs
//     refuses are ErrBadRequest ("VALIDATION: arguments_json: ...",
//     invalid_argument). It shows rule text: it is for admins only.
//
// # Errors
//
// Each error Ops makes keeps the message the API answers with, and
// errors.Is matches both its kind (ErrNotAdmin, ErrBadRequest,
// ErrNoPolicySource, ErrStoredPolicy, ErrUnavailable) and what it wraps;
// the errors of policy, policystore and registry pass through as they
// are. The dispatcher's policyError maps them: ErrNotAdmin
// permission_denied; ErrNoPolicySource and ErrStoredPolicy
// failed_precondition; ErrBadRequest, policy.ErrInvalid,
// policy.ErrTestsFailed, policystore.ErrBadComment and ErrBadScope
// invalid_argument; policystore.ErrUnknownVersion, ErrNoPolicy and
// registry.ErrNotFound not_found; policystore.ErrQuota
// resource_exhausted; a context's error its own code; anything else
// (ErrUnavailable, a store failure) unavailable.
package policyops
