package approvals

import (
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/toolwire/toolwire/internal/bus"
)

// The keys of the approvals bucket (doc.go, "Keys"). The tenant is always
// the second token, so a tenant's records are one subject filter and no
// key of one tenant can name another's.
const (
	callPrefix  = "call."
	noncePrefix = "nonce."
	grantPrefix = "grant."
)

// CallKey is the key of the approval record of call id in tenant.
func CallKey(tenant, id string) string { return callPrefix + tenant + "." + id }

// NonceKey is the key of a consumed nonce: its value is the call id that
// used it.
func NonceKey(tenant, nonce string) string { return noncePrefix + tenant + "." + nonce }

// GrantKey is the key of a grant.
func GrantKey(tenant, id string) string { return grantPrefix + tenant + "." + id }

// parseKey splits a key of kind prefix into tenant and id; ok is false for
// any other shape.
func parseKey(key, prefix string) (tenant, id string, ok bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found {
		return "", "", false
	}
	tenant, id, found = strings.Cut(rest, ".")
	if !found || !bus.ValidTenant(tenant) || id == "" || strings.Contains(id, ".") {
		return "", "", false
	}
	return tenant, id, true
}

// ValidID reports whether id can name an approval or a grant: a ULID in
// its canonical form (approvals are named by their call's id, grants get
// one). Anything else is refused before it becomes part of a key.
func ValidID(id string) bool {
	u, err := ulid.ParseStrict(id)
	return err == nil && u.String() == id
}

// validNonce reports whether n is a nonce this package makes: 32 lower
// case hex digits.
func validNonce(n string) bool {
	if len(n) != 32 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
