package httpexec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// secretRef is one entry of secret_headers: a header and where its value
// lives in the worker's environment.
type secretRef struct {
	header string // canonical
	ref    string // "env:NAME" or "file:/path"
}

// maxSecretBytes caps a secret read from a file.
const maxSecretBytes = 64 << 10

// checkSecretRef checks the form of a reference, not that it resolves.
func checkSecretRef(ref string) error {
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := ref[len("env:"):]
		if name == "" || !validEnvName(name) {
			return fmt.Errorf("%q: env:NAME wants a variable name (letters, digits, '_', not starting with a digit)", ref)
		}
	case strings.HasPrefix(ref, "file:"):
		path := ref[len("file:"):]
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return fmt.Errorf("%q: file:PATH wants an absolute, clean path", ref)
		}
	default:
		return fmt.Errorf("%q: want env:NAME or file:/path", ref)
	}
	return nil
}

func validEnvName(s string) bool {
	return validName(s) && (s[0] < '0' || s[0] > '9')
}

// resolveSecret reads a secret at call time, so a rotated file or a
// changed environment is seen by the next call. Errors name the reference,
// never the value.
func resolveSecret(ref string) (string, error) {
	var v string
	switch {
	case strings.HasPrefix(ref, "env:"):
		s, ok := os.LookupEnv(ref[len("env:"):])
		if !ok {
			return "", fmt.Errorf("secret %s: the variable is not set", ref)
		}
		v = s
	case strings.HasPrefix(ref, "file:"):
		f, err := os.Open(ref[len("file:"):])
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, errors.Unwrap(err)) // the *PathError repeats the path only
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
		if err != nil {
			return "", fmt.Errorf("secret %s: reading: %w", ref, errors.Unwrap(err))
		}
		if len(b) > maxSecretBytes {
			return "", fmt.Errorf("secret %s: larger than %d bytes", ref, maxSecretBytes)
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		return "", fmt.Errorf("secret %q: want env:NAME or file:/path", ref)
	}
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", ref)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("secret %s is not a valid header value (line breaks or NUL)", ref)
	}
	return v, nil
}

// minRedactBytes is the shortest secret redacted from response bodies:
// shorter values would mangle ordinary text and are not worth guessing.
const minRedactBytes = 8

const redacted = "[REDACTED]"

// redactor removes secret values from response bodies, in raw form and in
// JSON string-escaped form, so a server that echoes request headers does
// not hand a credential to the model.
type redactor struct {
	needles [][]byte
}

func newRedactor(values []string) *redactor {
	var r redactor
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
	return b
}

func (r *redactor) redactString(s string) string {
	if r == nil || len(r.needles) == 0 {
		return s
	}
	return string(r.redact([]byte(s)))
}
