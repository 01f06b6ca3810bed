package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/toolwire/toolwire/internal/bus"
)

// Identity is who is calling, as established from credentials. It is
// never read from a request body.
type Identity struct {
	Tenant string
	Agent  string
	Scopes []string
}

// AdminScope is the scope of administration: the policy RPCs, reading
// another agent's usage, approving a tool definition. It administers the
// key's own tenant, never another: a tenant's administrator is not the
// installation's (InstallationScope).
const AdminScope = "admin"

// InstallationScope is the installation's operators': a key holding it
// sees every tenant where a face shows more than one (the dashboard's
// calls, dead letters, limits). It is never implied by "*": a key file
// names it for the keys that cross tenants. Through the API a key still
// acts as its own tenant.
const InstallationScope = "installation"

// CrossesTenants reports whether id may see every tenant's records
// (InstallationScope, named: "*" does not imply it).
func (id Identity) CrossesTenants() bool { return slices.Contains(id.Scopes, InstallationScope) }

// AdministersInstallation reports whether id may administer what every
// tenant shares — the tool definitions (approving an MCP tool's changed
// definition, reading executor configuration) and the worker pools: the
// AdminScope ("*" holds it) together with InstallationScope. A tenant's
// admin administers its tenant's calls, not the installation's tools.
func (id Identity) AdministersInstallation() bool {
	return id.CrossesTenants() && slices.ContainsFunc(id.Scopes, func(s string) bool { return s == "*" || s == AdminScope })
}

// MaySee reports whether id may see a record of tenant: its own tenant's,
// or any with InstallationScope. The one boundary every face draws (the
// API and the MCP face by reading the caller's tenant's subjects only,
// the dashboard and toolctl through it); a record outside it answers as
// one that does not exist.
func (id Identity) MaySee(tenant string) bool {
	return tenant != "" && (tenant == id.Tenant || id.CrossesTenants())
}

// Visibility is the installation's setting of which calls of its own
// tenant an agent's key sees (MaySeeCall): VisibilityTenant (the
// default) or VisibilityOwn.
type Visibility string

const (
	// VisibilityTenant: every key sees every call of its tenant, whichever
	// agent made it.
	VisibilityTenant Visibility = "tenant"
	// VisibilityOwn: a key sees the calls its own agent made; keys with
	// the admin or approve scope ("*" holds both) see the whole tenant,
	// and InstallationScope every tenant.
	VisibilityOwn Visibility = "own"
)

// approveScope is approvalflow.ApproveScope (a test keeps them equal):
// an approver decides on any call of the tenant, so it sees them all.
const approveScope = "approve"

// Validate refuses a Visibility that is neither VisibilityTenant nor
// VisibilityOwn ("" is VisibilityTenant).
func (v Visibility) Validate() error {
	switch v {
	case "", VisibilityTenant, VisibilityOwn:
		return nil
	}
	return fmt.Errorf("identity: agent visibility %q: want %q or %q", string(v), VisibilityTenant, VisibilityOwn)
}

// SeesEveryAgent reports whether id sees the calls of every agent of the
// tenants it may see under v: always under VisibilityTenant; under
// VisibilityOwn with the admin or approve scope ("*" holds both) or
// InstallationScope.
func (id Identity) SeesEveryAgent(v Visibility) bool {
	return v != VisibilityOwn || id.CrossesTenants() ||
		slices.ContainsFunc(id.Scopes, func(s string) bool { return s == "*" || s == AdminScope || s == approveScope })
}

// MaySeeCall reports whether id may see, under v, a call that agent of
// tenant made: the one boundary of calls every face draws (the dispatcher
// core for the API, the MCP endpoint and toolctl, the dashboard for its
// pages). A call outside it answers as one that does not exist.
func (id Identity) MaySeeCall(tenant, agent string, v Visibility) bool {
	return id.MaySee(tenant) && (id.SeesEveryAgent(v) || (agent != "" && agent == id.Agent))
}

type identityKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// From returns the identity in ctx.
func From(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// TenantRe is the rule tenant names follow (bus.TenantPattern). Tenants
// become subject tokens and KV keys as they are, so the rule keeps them
// injective and valid there (no `.`, `*`, `>`, `:` or non-ASCII); a tenant
// that breaks it is refused, never mapped to a token.
var TenantRe = regexp.MustCompile(bus.TenantPattern)

// ErrBadTenant is returned for an identity whose tenant does not follow
// TenantRe (possible only for identities built in Go: Authenticate
// refuses such credentials).
var ErrBadTenant = errors.New("identity: tenant name must match " + bus.TenantPattern)

// CheckTenant refuses (ErrBadTenant) an identity whose tenant cannot be a
// subject token as it is.
func CheckTenant(id Identity) error {
	if !bus.ValidTenant(id.Tenant) {
		return fmt.Errorf("%w: %q", ErrBadTenant, id.Tenant)
	}
	return nil
}

// ErrUnauthenticated is returned for a missing or unknown API key.
var ErrUnauthenticated = errors.New("identity: missing or unknown API key")

// Authenticator turns an HTTP request's credentials into an Identity.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// OpenAccess authenticates every request as one fixed identity. It is the
// default when no API keys are configured: fit for a loopback listener,
// never for a shared network.
type OpenAccess struct{ Identity Identity }

// Authenticate returns the fixed identity.
func (o OpenAccess) Authenticate(*http.Request) (Identity, error) { return o.Identity, nil }

// Default is the identity of OpenAccess by default.
var Default = Identity{Tenant: "default", Agent: "local", Scopes: []string{"*", InstallationScope}}

// APIKeys authenticates `Authorization: Bearer <key>` against a set of keys
// stored as SHA-256 hashes, so the key file holds no usable secret.
type APIKeys struct {
	keys map[[32]byte]Identity
}

// APIKeyFile is the YAML form of an API key file:
//
//	keys:
//	  - sha256: <hex of the key's SHA-256>
//	    tenant: acme
//	    agent: support-bot
//	    scopes: [search, tickets]
type APIKeyFile struct {
	Keys []struct {
		SHA256 string   `json:"sha256"`
		Tenant string   `json:"tenant"`
		Agent  string   `json:"agent"`
		Scopes []string `json:"scopes"`
	} `json:"keys"`
}

// LoadAPIKeys reads an API key file.
func LoadAPIKeys(path string) (*APIKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: api keys: %w", err)
	}
	var f APIKeyFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("identity: api keys %s: %w", path, err)
	}
	k := &APIKeys{keys: map[[32]byte]Identity{}}
	for i, e := range f.Keys {
		raw, err := hex.DecodeString(e.SHA256)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("identity: api keys %s: keys[%d].sha256 is not a hex SHA-256", path, i)
		}
		if e.Tenant == "" || e.Agent == "" {
			return nil, fmt.Errorf("identity: api keys %s: keys[%d] needs tenant and agent", path, i)
		}
		if !TenantRe.MatchString(e.Tenant) {
			return nil, fmt.Errorf("identity: api keys %s: keys[%d].tenant %q must match %s", path, i, e.Tenant, TenantRe)
		}
		k.keys[[32]byte(raw)] = Identity{Tenant: e.Tenant, Agent: e.Agent, Scopes: e.Scopes}
	}
	return k, nil
}

// Authenticate checks the bearer key.
func (k *APIKeys) Authenticate(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || key == "" {
		return Identity{}, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(key))
	for stored, id := range k.keys {
		if subtle.ConstantTimeCompare(stored[:], sum[:]) == 1 {
			return id, nil
		}
	}
	return Identity{}, ErrUnauthenticated
}

// Authenticate wraps h so that every request carries the identity auth
// establishes; unauthenticated requests get a Connect `unauthenticated`
// error.
func Authenticate(auth Authenticator, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := auth.Authenticate(r)
		if err == nil && !TenantRe.MatchString(id.Tenant) {
			// A custom Authenticator produced a tenant that cannot be a
			// subject token or KV key; refuse rather than alias tenants.
			err = ErrUnauthenticated
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthenticated","message":"missing or unknown API key"}`))
			return
		}
		h.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}
