package toolctl_test

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
)

func TestAudit(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	for _, args := range [][]string{
		{"call", "echo", `{"text":"one"}`},
		{"call", "echo", `{"text":"two"}`, "--session", "s-1"},
		{"call", "fail", `{"type":"PERMANENT"}`},
	} {
		if o := b.run(t, args...); o.code > 1 {
			t.Fatalf("%v: %+v", args, o)
		}
	}
	nats := []string{"audit", "--nats-url", b.stack.Env.URL}

	o := b.run(t, nats...)
	if o.code != 0 {
		t.Fatalf("audit: %+v", o)
	}
	var outcomes []string
	sc := bufio.NewScanner(strings.NewReader(o.stdout))
	for sc.Scan() {
		var r struct {
			CallID   string          `json:"call_id"`
			Tool     string          `json:"tool"`
			Outcome  string          `json:"outcome"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.CallID == "" || len(r.Response) == 0 {
			t.Fatalf("record without call or response: %s", sc.Text())
		}
		outcomes = append(outcomes, r.Tool+":"+r.Outcome)
	}
	if strings.Join(outcomes, ",") != "echo:ok,echo:ok,fail:error" {
		t.Fatalf("records: %v", outcomes)
	}
	if o := b.run(t, append(nats, "--session", "s-1")...); strings.Count(o.stdout, "\n") != 1 || !strings.Contains(o.stdout, `"two"`) {
		t.Fatalf("session filter: %+v", o)
	}
	if o := b.run(t, append(nats, "--outcome", "PERMANENT")...); strings.Count(o.stdout, "\n") != 1 {
		t.Fatalf("outcome filter: %+v", o)
	}
	if o := b.run(t, append(nats, "--since", "1h", "--until", "2h")...); o.stdout != "" {
		t.Fatalf("empty range: %+v", o)
	}
	if o := b.run(t, append(nats, "--since", "yesterday")...); o.code != 2 {
		t.Fatalf("bad --since: %+v", o)
	}

	o = b.run(t, append(nats, "--verify")...)
	if o.code != 0 || !strings.Contains(o.stdout, "calls: 3") || !strings.Contains(o.stdout, "anomalies: none") ||
		!strings.Contains(o.stdout, "ok             2") {
		t.Fatalf("verify: %+v", o)
	}

	dir := filepath.Join(t.TempDir(), "export")
	if o := b.run(t, append(nats, "--export", dir)...); o.code != 0 || !strings.Contains(o.stderr, "exported 3 records") {
		t.Fatalf("export: %+v", o)
	}
	if o := b.run(t, "audit", "verify-export", dir); o.code != 0 || !strings.Contains(o.stdout, "verified: 3 records") {
		t.Fatalf("verify-export: %+v", o)
	}
	if o := b.run(t, "audit", "verify-export", t.TempDir()); o.code != 1 {
		t.Fatalf("verify-export of an empty dir: %+v", o)
	}
}

// TestReplayNeedsASelection: replay refuses to replay everything by
// accident, and reports a call it cannot find.
func TestReplayNeedsASelection(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	nats := []string{"replay", "--nats-url", b.stack.Env.URL}
	if o := b.run(t, nats...); o.code != 2 || !strings.Contains(o.stderr, "say which calls") {
		t.Fatalf("no selection: %+v", o)
	}
	if o := b.run(t, append(nats, "--call-id", "01JD0000000000000000000000")...); o.code != 1 || !strings.Contains(o.stderr, "not in the calls stream") {
		t.Fatalf("unknown call: %+v", o)
	}
	// A recorded call and no shadow pool: refused at once, naming the fix,
	// not after a --wait per call.
	if o := b.run(t, "call", "echo", `{"text":"x"}`); o.code != 0 {
		t.Fatalf("call: %+v", o)
	}
	if o := b.run(t, append(nats, "--tool", "echo", "--since", "1h", "--wait", "1h")...); o.code != 1 || !strings.Contains(o.stderr, "no shadow pool is running") {
		t.Fatalf("no shadow pool: %+v", o)
	}
}
