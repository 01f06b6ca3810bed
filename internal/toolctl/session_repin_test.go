package toolctl_test

import (
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
)

// TestSessionRepin: call --pin-versions pins the tool's version, session
// show lists it, session repin clears it.
func TestSessionRepin(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	if o := b.run(t, "call", "echo", `{"text":"hi"}`, "--session", "s-pin", "--pin-versions"); o.code != 0 {
		t.Fatalf("call: %+v", o)
	}
	o := b.run(t, "session", "show", "s-pin")
	if o.code != 0 || !strings.Contains(o.stdout, "pinned:\n  echo = ") {
		t.Fatalf("show: %+v", o)
	}
	o = b.run(t, "session", "repin", "s-pin", "echo")
	if o.code != 0 || !strings.Contains(o.stdout, "session s-pin: 0 pin(s) left") {
		t.Fatalf("repin: %+v", o)
	}
	if o := b.run(t, "session", "show", "s-pin"); o.code != 0 || strings.Contains(o.stdout, "pinned:") {
		t.Fatalf("show after repin: %+v", o)
	}
}
