package toolctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestToolsApprove: an operator approves exactly the definition a
// disabled tool shows; a wrong hash, a tool without an external
// definition and credentials without the admin scope are refused.
func TestToolsApprove(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	const name = "mcp__srv__lookup"
	spec := &toolwirev1.ToolSpec{
		Name: name, Provider: "srv", Description: "looks things up", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP,
		Config:          &toolwirev1.ToolSpec_Mcp{Mcp: &toolwirev1.McpConfig{Server: "srv", Tool: "lookup", DefinitionHash: "newhash"}},
		InputSchemaJson: `{"type":"object"}`,
		Disabled:        true, DisabledReason: "definition changed",
	}
	if _, err := registry.Publish(t.Context(), b.stack.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec}); err != nil {
		t.Fatal(err)
	}
	b.stack.WaitTool(t, name)

	if o := b.run(t, "tools", "show", name); o.code != 0 || !strings.Contains(o.stdout, "newhash") {
		t.Fatalf("show: %+v", o)
	}
	if o := b.run(t, "tools", "approve", name); o.code != 2 || !strings.Contains(o.stderr, "hash") {
		t.Fatalf("approve without --hash: %+v", o)
	}
	if o := b.run(t, "tools", "approve", name, "--hash", "oldhash"); o.code != 1 || !strings.Contains(o.stderr, "newhash") {
		t.Fatalf("approve with a stale hash: %+v", o)
	}
	if o := b.run(t, "tools", "approve", "echo", "--hash", "x"); o.code != 1 || !strings.Contains(o.stderr, "no external definition") {
		t.Fatalf("approve a native tool: %+v", o)
	}
	if o := b.run(t, "tools", "approve", "nope", "--hash", "x"); o.code != 1 || !strings.Contains(o.stderr, "NOT_FOUND") {
		t.Fatalf("approve an unknown tool: %+v", o)
	}
	if _, ok, _ := registry.Approved(t.Context(), b.stack.Env.Bus.Registry, name); ok {
		t.Fatal("a refused approval was recorded")
	}
	if o := b.run(t, "tools", "approve", name, "--hash", "newhash"); o.code != 0 {
		t.Fatalf("approve: %+v", o)
	}
	got, ok, err := registry.Approved(t.Context(), b.stack.Env.Bus.Registry, name)
	if err != nil || !ok || got != "newhash" {
		t.Fatalf("approval recorded = %q %v %v, want newhash", got, ok, err)
	}

	// Credentials without the admin scope cannot approve.
	user := setup(t, dispatchtest.Options{Auth: identity.OpenAccess{Identity: identity.Identity{Tenant: "default", Agent: "a", Scopes: []string{"tools"}}}})
	if _, err := registry.Publish(t.Context(), user.stack.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec}); err != nil {
		t.Fatal(err)
	}
	user.stack.WaitTool(t, name)
	if o := user.run(t, "tools", "approve", name, "--hash", "newhash"); o.code != 1 || !strings.Contains(o.stderr, "admin") {
		t.Fatalf("approve without the admin scope: %+v", o)
	}
}

// TestSession: toolctl call, session apply and session show.
func TestSession(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	o := b.run(t, "-o", "json", "submit", "remember", `{"key":"colour","value":"blue"}`, "--session", "s-9")
	if o.code != 0 {
		t.Fatalf("submit: %+v", o)
	}
	var sub struct {
		CallID string `json:"callId"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &sub); err != nil || sub.CallID == "" {
		t.Fatalf("submit output %q: %v", o.stdout, err)
	}
	if o := b.run(t, "get", sub.CallID, "--wait", "30s"); o.code != 0 {
		t.Fatalf("get: %+v", o)
	}
	for _, want := range []string{"applied 1 intent(s) to session s-9 (revision 1)", "applied 0 intent(s) to session s-9 (revision 1)"} {
		if o := b.run(t, "session", "apply", sub.CallID); o.code != 0 || !strings.Contains(o.stdout, want) {
			t.Fatalf("apply: want %q, got %+v", want, o)
		}
	}
	o = b.run(t, "session", "show", "s-9")
	if o.code != 0 || !strings.Contains(o.stdout, `colour = "blue"`) || !strings.Contains(o.stdout, "SET_STATE") {
		t.Fatalf("show: %+v", o)
	}
	if o := b.run(t, "session", "show", "never-used"); o.code != 0 || !strings.Contains(o.stdout, "revision:     0") {
		t.Fatalf("show empty: %+v", o)
	}
}
