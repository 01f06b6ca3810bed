package httpexec

import (
	"bytes"
	"encoding/json"

	"github.com/toolwire/toolwire/internal/configvalue"
	"github.com/toolwire/toolwire/internal/redact"
)

// secretRef is one entry of secret_headers: a header and where its value
// lives in the worker's environment.
type secretRef struct {
	header string // canonical
	ref    string // "env:NAME" or "file:/path"
}

// checkSecretRef checks the form of a reference, not that it resolves.
func checkSecretRef(ref string) error { return configvalue.CheckSecretRef(ref) }

// resolveSecret reads a secret at call time, so a rotated file or a
// changed environment is seen by the next call. Errors name the reference,
// never the value.
func resolveSecret(ref string) (string, error) { return configvalue.ResolveSecret(ref) }

// minRedactBytes is the shortest secret redacted from response bodies:
// shorter values would mangle ordinary text and are not worth guessing.
const minRedactBytes = 8

const redacted = "[REDACTED]"

// redactor removes secret values from response bodies, in raw form and in
// JSON string-escaped form, so a server that echoes request headers does
// not hand a credential to the model; and the values of secret arguments
// (internal/redact), so that a body is clean before any of it is cut for
// a message (a cut secret would no longer be found whole).
type redactor struct {
	needles [][]byte
	args    *redact.Secrets
}

func newRedactor(values []string, args *redact.Secrets) *redactor {
	r := redactor{args: args}
	for _, v := range values {
		if len(v) < minRedactBytes {
			continue
		}
		r.needles = append(r.needles, []byte(v))
		enc, _ := json.Marshal(v) // a string always encodes
		if esc := enc[1 : len(enc)-1]; !bytes.Equal(esc, []byte(v)) {
			r.needles = append(r.needles, esc)
		}
	}
	return &r
}

func (r *redactor) redact(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, n := range r.needles {
		if bytes.Contains(b, n) {
			b = bytes.ReplaceAll(b, n, []byte(redacted))
		}
	}
	return r.args.Bytes(b)
}

func (r *redactor) redactString(s string) string {
	if r == nil || (len(r.needles) == 0 && r.args == nil) {
		return s
	}
	return string(r.redact([]byte(s)))
}
