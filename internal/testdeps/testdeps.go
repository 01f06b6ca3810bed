// Package testdeps is the one rule for a test whose host lacks something
// it needs (a Node.js, an npm package, an isolation mechanism): with
// CI=true that is a failure, never a skip (CI must run every test);
// elsewhere the test is skipped with the reason, so a laptop without the
// dependency can still run the rest.
package testdeps

import (
	"fmt"
	"os"
	"testing"
)

// Missing ends t because something it needs is missing: t.Fatal under
// CI=true, t.Skip otherwise, with the message and the hint (how to get
// it; may be empty).
func Missing(t testing.TB, hint, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " — CI=true: a failure, not a skip")
	}
	t.Skip(msg)
}
