package configvalue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxSecretBytes caps a secret read from a file.
const MaxSecretBytes = 64 << 10

// CheckSecretRef checks the form of a secret reference — "env:NAME" or
// "file:/absolute/path" — not that it resolves.
func CheckSecretRef(ref string) error {
	switch {
	case strings.HasPrefix(ref, "env:"):
		if name := ref[len("env:"):]; !validEnvName(name) {
			return fmt.Errorf("%q: env:NAME wants a variable name (letters, digits, '_', not starting with a digit)", ref)
		}
	case strings.HasPrefix(ref, "file:"):
		if path := ref[len("file:"):]; !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return fmt.Errorf("%q: file:PATH wants an absolute, clean path", ref)
		}
	default:
		return fmt.Errorf("%q: want env:NAME or file:/path", ref)
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ResolveSecret reads a secret now, so that a rotated file or a changed
// environment is seen by the next use. A file's trailing line breaks are
// dropped. Errors name the reference, never the value; an empty secret,
// one over MaxSecretBytes, or one with line breaks or NUL inside (it would
// split a header) is an error.
func ResolveSecret(ref string) (string, error) {
	if err := CheckSecretRef(ref); err != nil {
		return "", fmt.Errorf("secret %w", err)
	}
	var v string
	if name, ok := strings.CutPrefix(ref, "env:"); ok {
		s, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("secret %s: the variable is not set", ref)
		}
		v = s
	} else {
		f, err := os.Open(ref[len("file:"):])
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, errors.Unwrap(err)) // the *PathError repeats the path only
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
		if err != nil {
			return "", fmt.Errorf("secret %s: reading: %w", ref, errors.Unwrap(err))
		}
		if len(b) > MaxSecretBytes {
			return "", fmt.Errorf("secret %s: larger than %d bytes", ref, MaxSecretBytes)
		}
		v = strings.TrimRight(string(b), "\r\n")
	}
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", ref)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("secret %s has line breaks or NUL inside", ref)
	}
	return v, nil
}
