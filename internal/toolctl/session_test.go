package toolctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
)

// TestSessionListAndEnd: toolctl session end ends a session (the next
// call in it is refused SESSION_INACTIVE), session list shows it with its
// state, filtered by state and bounded by --limit; a key without the
// admin scope cannot end one.
func TestSessionListAndEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	for _, s := range []string{"s-1", "s-2"} {
		if o := b.run(t, "session", "mode", s, ""); o.code != 0 {
			t.Fatalf("mode: %+v", o)
		}
	}
	if o := b.run(t, "session", "end", "s-1", "--reason", "hung up"); o.code != 0 || !strings.Contains(o.stdout, "session s-1: ended (hung up") {
		t.Fatalf("end: %+v", o)
	}
	if o := b.run(t, "session", "end", "s-1", "--reason", "again"); o.code != 0 || !strings.Contains(o.stdout, "ended (hung up") {
		t.Fatalf("end again: %+v", o)
	}
	if o := b.run(t, "call", "echo", `{"text":"hi"}`, "--session", "s-1"); o.code == 0 || !strings.Contains(o.stdout+o.stderr, "SESSION_INACTIVE") {
		t.Fatalf("call in an ended session: %+v", o)
	}

	o := b.run(t, "session", "list")
	if o.code != 0 || !strings.Contains(o.stdout, "SESSION") {
		t.Fatalf("list: %+v", o)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "s-2") || !strings.Contains(lines[1], "active") ||
		!strings.HasPrefix(lines[2], "s-1") || !strings.Contains(lines[2], "ended") || !strings.Contains(lines[2], "hung up") {
		t.Fatalf("list: %q", lines)
	}
	if o := b.run(t, "session", "list", "--state", "ended"); o.code != 0 || strings.Contains(o.stdout, "s-2") || !strings.Contains(o.stdout, "s-1") {
		t.Fatalf("list ended: %+v", o)
	}
	if o := b.run(t, "session", "list", "--limit", "1"); o.code != 0 || strings.Contains(o.stdout, "s-1") || !strings.Contains(o.stderr, "raise --limit") {
		t.Fatalf("list --limit 1: %+v", o)
	}
	if o := b.run(t, "session", "list", "--state", "gone"); o.code != 2 {
		t.Fatalf("list --state gone: %+v", o)
	}
	o = b.run(t, "-o", "json", "session", "list", "--state", "active")
	var out struct {
		Sessions []struct {
			Session string `json:"session"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &out); o.code != 0 || err != nil || len(out.Sessions) != 1 || out.Sessions[0].Session != "s-2" {
		t.Fatalf("list -o json: %+v %v", o, err)
	}

	user := setup(t, dispatchtest.Options{Auth: identity.OpenAccess{Identity: identity.Identity{Tenant: "default", Agent: "a", Scopes: []string{"tools"}}}})
	if o := user.run(t, "session", "end", "s-1"); o.code != 1 || !strings.Contains(o.stderr, "admin") {
		t.Fatalf("end without the admin scope: %+v", o)
	}
}

// TestSessionModeShowAndFilter: toolctl session mode puts a session in a
// mode the policy declares (and refuses one it does not), a call the mode
// forbids is refused MODE_RESTRICTED while the same call in another
// session runs, session show names the mode and, once the session is
// ended, its end, and session list --mode lists the sessions in that mode
// only.
func TestSessionModeShowAndFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	b.stack.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses on a call}\n  text: {}\n")
	if o := b.run(t, "session", "mode", "s-voice", "voice"); o.code != 0 || !strings.Contains(o.stdout, "session s-voice: mode voice") {
		t.Fatalf("mode voice: %+v", o)
	}
	if o := b.run(t, "session", "mode", "s-text", "text"); o.code != 0 {
		t.Fatalf("mode text: %+v", o)
	}
	if o := b.run(t, "session", "mode", "s-voice", "shout"); o.code == 0 || !strings.Contains(o.stderr, `"shout"`) {
		t.Fatalf("an undeclared mode: %+v", o)
	}
	o := b.run(t, "call", "sleep", `{"duration":"1ms"}`, "--session", "s-voice")
	if o.code == 0 || !strings.Contains(o.stderr, `error: MODE_RESTRICTED: mode "voice" forbids this call of "sleep" (rule "voice-no-sleep")`) {
		t.Fatalf("a call the mode forbids: %+v", o)
	}
	if o := b.run(t, "call", "sleep", `{"duration":"1ms"}`, "--session", "s-text"); o.code != 0 {
		t.Fatalf("the same call in another mode: %+v", o)
	}

	if o := b.run(t, "session", "end", "s-voice", "--reason", "hung up"); o.code != 0 {
		t.Fatalf("end: %+v", o)
	}
	o = b.run(t, "session", "show", "s-voice")
	if o.code != 0 || !strings.Contains(o.stdout, "mode:         voice\n") || !strings.Contains(o.stdout, "ended:        hung up\n") ||
		!strings.Contains(o.stdout, "SET_MODE") || !strings.Contains(o.stdout, "END_SESSION") {
		t.Fatalf("show: %+v", o)
	}
	o = b.run(t, "session", "list", "--mode", "voice")
	if o.code != 0 || !strings.Contains(o.stdout, "s-voice") || strings.Contains(o.stdout, "s-text") {
		t.Fatalf("list --mode voice: %+v", o)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "ended") || !strings.Contains(lines[1], "voice") {
		t.Fatalf("list --mode voice: %q", lines)
	}
}
