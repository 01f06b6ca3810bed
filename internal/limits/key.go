package limits

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolwire/toolwire/internal/bus"
)

// Key names one counted thing: a limit of a tenant applied to one key
// value, e.g. {Tenant: "acme", Limit: "per-session-calls", Value:
// "sess-42"}. The store builds the bucket key from it; no part reaches the
// bucket raw unless it is a plain token.
type Key struct {
	// Tenant must be bus.ValidTenant; anything else is refused
	// (ErrInvalid), never mapped.
	Tenant string
	// Limit is the id of the limit (from the policy document). A plain
	// token (PlainLimitPattern) is kept; anything else, up to MaxInputBytes,
	// becomes "=" and its hash. Empty is refused.
	Limit string
	// Value is what the limit is keyed by: an agent, a session id, a tool
	// name, the result of a CEL expression, several joined. A plain token
	// (PlainValuePattern) is kept; anything else, up to MaxInputBytes and
	// including the empty string, becomes "=" and its hash.
	Value string
}

const (
	// PlainLimitPattern is what a limit id must look like to reach the
	// bucket key as it is.
	PlainLimitPattern = `^[A-Za-z0-9_-]{1,64}$`
	// PlainValuePattern is what a key value must look like to reach the
	// bucket key as it is.
	PlainValuePattern = `^[A-Za-z0-9_-]{1,128}$`
	// MaxInputBytes bounds a limit id, a key value and a call id.
	MaxInputBytes = 1024
	// MaxKeyLen is the longest bucket key the store builds: kind, tenant,
	// limit, value and a budget window's start.
	MaxKeyLen = len(kindBudget) + 1 + 64 + 1 + 64 + 1 + 128 + 1 + 20
)

// kind is the first token of a bucket key: which machine its value
// belongs to.
type kind string

const (
	kindRate        kind = "rate"
	kindConcurrency kind = "conc"
	kindBudget      kind = "budget"
	kindLoop        kind = "loop"
)

// bucketKey is "<kind>.<tenant>.<limit>.<value>", each part checked or
// hashed (see Key).
func (k Key) bucketKey(kd kind) (string, error) {
	if !bus.ValidTenant(k.Tenant) {
		return "", fmt.Errorf("%w: tenant %q does not match %s", ErrInvalid, k.Tenant, bus.TenantPattern)
	}
	if k.Limit == "" {
		return "", fmt.Errorf("%w: empty limit id", ErrInvalid)
	}
	if len(k.Limit) > MaxInputBytes || len(k.Value) > MaxInputBytes {
		return "", fmt.Errorf("%w: limit id or key value over %d bytes", ErrInvalid, MaxInputBytes)
	}
	var b strings.Builder
	b.Grow(MaxKeyLen)
	b.WriteString(string(kd))
	b.WriteByte('.')
	b.WriteString(k.Tenant)
	b.WriteByte('.')
	writeToken(&b, k.Limit, 64)
	b.WriteByte('.')
	writeToken(&b, k.Value, 128)
	return b.String(), nil
}

// windowKey is the bucket key of one budget window: the key and the
// window's start in Unix seconds.
func windowKey(key string, start int64) string {
	return key + "." + strconv.FormatInt(start, 10)
}

// writeToken writes s if it is a plain token of at most max bytes, else
// "=" and the unpadded base64url SHA-256 of s. "=" is a legal key
// character no plain token has, so the two forms never meet, and no input
// reaches another key.
func writeToken(b *strings.Builder, s string, max int) {
	if plain(s, max) {
		b.WriteString(s)
		return
	}
	sum := sha256.Sum256([]byte(s))
	var enc [43]byte
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	b.WriteByte('=')
	b.Write(enc[:])
}

func plain(s string, max int) bool { return bus.PlainToken(s, max) }
