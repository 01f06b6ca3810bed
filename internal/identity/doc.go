// Package identity establishes who is calling, from credentials only.
//
// Identity (tenant, agent, scopes) comes from credentials only, never from
// a request body. An Authenticator turns an HTTP request into an Identity;
// Authenticate wraps the API handler with it and answers a Connect
// `unauthenticated` error (HTTP 401) when it fails or yields a tenant that
// does not match TenantRe (tenants become subject tokens and KV keys as
// they are). CheckTenant refuses such an identity too (ErrBadTenant);
// the dispatcher calls it before anything is recorded: a tenant is never
// mapped to a token, since a.b and a_b would then share one.
// OpenAccess, the default without an API key file, makes every request
// Default (tenant default, agent local, scopes *); the dispatcher
// process (internal/dispatchd) logs a warning when its listener is not
// loopback. APIKeys checks
// `Authorization: Bearer <key>` in constant time against the SHA-256
// hashes of an APIKeyFile, so the file holds no usable secret. A call's
// Caller is the identity plus the session, user, run and turn the request
// names.
//
// # One boundary
//
// Identity.MaySeeCall decides whether a key may see a call, on every face
// (the dispatcher core answers the API, the MCP endpoint and toolctl; the
// dashboard asks it for its pages): the call's tenant must be the key's
// (MaySee), unless the key holds InstallationScope, which is never implied
// by "*"; within the tenant the installation's Visibility decides —
// VisibilityTenant (the default) shows every call of the tenant,
// VisibilityOwn only the calls the key's own agent made, except to keys
// with the admin or approve scope ("*" holds both) or InstallationScope
// (SeesEveryAgent). A call outside answers as a made-up id.
//
// It holds no state beyond the key set: every face (the Connect API, the
// MCP endpoint, the dashboard) authenticates with the same Authenticator,
// so one key means one caller everywhere.
package identity
