package approvals

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/toolwire/toolwire/internal/policy"
)

// Keys are the dispatchers' approval token keys: the first signs, every
// one verifies, so a rotation is done in rolling steps (doc.go, "Tokens").
// A Keys never shows a key: not in errors, not in logs (String hides it).
type Keys struct {
	signID string
	keys   map[string][]byte
}

// Limits of a key file.
const (
	// MaxKeyFileBytes bounds a key file.
	MaxKeyFileBytes = 64 << 10
	// MinKeyBytes is the shortest key accepted (256 bits).
	MinKeyBytes = 32
	// maxTokenBytes bounds a token presented, checked before anything
	// else is done with it.
	maxTokenBytes = 4096
)

var keyIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ErrKeyFile is matched by the errors of LoadKeys and ParseKeys.
var ErrKeyFile = errors.New("approvals: bad token key file")

// LoadKeys reads a key file: one key per line, "id:base64key" (standard
// or URL base64, padded or not), blank lines and lines starting with #
// ignored; the first key signs. The file must not be readable or writable
// by group or others (mode 0600 or stricter) and is at most
// MaxKeyFileBytes. Errors name the line, never a key.
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrKeyFile, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o: group and others must have no access (chmod 600)", ErrKeyFile, path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(data) > MaxKeyFileBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrKeyFile, path, MaxKeyFileBytes)
	}
	return ParseKeys(data)
}

// ParseKeys reads the contents of a key file (LoadKeys).
func ParseKeys(data []byte) (*Keys, error) {
	k := &Keys{keys: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, ":")
		if !ok || !keyIDRe.MatchString(id) {
			return nil, fmt.Errorf("%w: line %d: want id:base64key, the id of 1-32 letters, digits, _ or -", ErrKeyFile, n)
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("%w: line %d: key id %q given twice", ErrKeyFile, n, id)
		}
		key, err := decodeKey(strings.TrimSpace(enc))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d (key %q): the key is not base64", ErrKeyFile, n, id)
		}
		if len(key) < MinKeyBytes {
			return nil, fmt.Errorf("%w: line %d (key %q): a key needs at least %d bytes, it has %d", ErrKeyFile, n, id, MinKeyBytes, len(key))
		}
		k.keys[id] = key
		if k.signID == "" {
			k.signID = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if k.signID == "" {
		return nil, fmt.Errorf("%w: no key", ErrKeyFile)
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// SigningKeyID is the id of the key that signs.
func (k *Keys) SigningKeyID() string { return k.signID }

// String names the keys by id only.
func (k *Keys) String() string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	return fmt.Sprintf("approval token keys (signing %s; %d in all)", k.signID, len(ids))
}

// tokenPrefix starts every token; the format's version.
const tokenPrefix = "tw1."

// ErrBadToken is matched by every refusal of Verify: the token is
// malformed, its key unknown or its MAC wrong. The message never says
// which part of the MAC failed.
var ErrBadToken = errors.New("approvals: the approval token is not valid")

// Sign returns a token for a: "tw1.<key id>.<payload>.<mac>", the payload
// the binding as JSON (tenant, agent, session, tool, spec version, the
// arguments' SHA-256, expiry, nonce and the approval id) in base64url, the
// MAC HMAC-SHA256 over the key id and the payload with the signing key.
// The binding is readable by whoever holds the token (it says nothing the
// caller does not know); only the MAC makes it unforgeable.
func (k *Keys) Sign(a *policy.Approval) (string, error) {
	payload, err := json.Marshal(tokenPayload(a))
	if err != nil {
		return "", fmt.Errorf("approvals: encode token: %w", err)
	}
	body := tokenPrefix + k.signID + "." + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(mac(k.keys[k.signID], body)), nil
}

// Verify checks a token's MAC (in constant time) with the key it names,
// which must be one of k, and returns the binding it carries; it does not
// check the binding against a call (policy.Approval.Check does) nor that
// the nonce is unused (the store does).
func (k *Keys) Verify(token string) (*policy.Approval, error) {
	if len(token) > maxTokenBytes || !strings.HasPrefix(token, tokenPrefix) || strings.ContainsFunc(token[len(tokenPrefix):], notTokenRune) {
		// One spelling: base64 decoding skips \r and \n, so they are
		// refused here, as is anything outside the alphabet.
		return nil, ErrBadToken
	}
	cut := strings.LastIndexByte(token, '.')
	if cut < len(tokenPrefix) {
		return nil, ErrBadToken
	}
	body, sig := token[:cut], token[cut+1:]
	id, payload, ok := strings.Cut(body[len(tokenPrefix):], ".")
	if !ok {
		return nil, ErrBadToken
	}
	key, known := k.keys[id]
	if !known {
		return nil, fmt.Errorf("%w: it was signed with a key this installation does not hold", ErrBadToken)
	}
	// Strict: a token has one spelling (no unused bits set), so no two
	// texts verify as the same token.
	got, err := strictB64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key, body)) {
		return nil, ErrBadToken
	}
	raw, err := strictB64.DecodeString(payload)
	if err != nil {
		return nil, ErrBadToken
	}
	var a policy.Approval
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.ID == "" || a.Nonce == "" {
		return nil, ErrBadToken
	}
	return &a, nil
}

var strictB64 = base64.RawURLEncoding.Strict()

// notTokenRune reports whether r cannot appear in a token after its
// prefix: key ids and base64url text, separated by dots.
func notTokenRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
}

// tokenPayload is what a token binds: the approval without approver and
// reason (a token is the caller's own confirmation).
func tokenPayload(a *policy.Approval) policy.Approval {
	return policy.Approval{ID: a.ID, Tenant: a.Tenant, Agent: a.Agent, Session: a.Session, Tool: a.Tool,
		SpecVersion: a.SpecVersion, ArgsSHA256: a.ArgsSHA256, Expires: a.Expires, Nonce: a.Nonce}
}

// mac is HMAC-SHA256 of the domain, then body, with key.
func mac(key []byte, body string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("toolwire approval token v1\x00"))
	h.Write([]byte(body))
	return h.Sum(nil)
}
