package toolctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/pkg/tool"
)

func approvalTools() []*tool.Tool {
	return []*tool.Tool{tool.Must(tool.New("wipe", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))}
}

// call prints the approval id and the command that approves a parked
// call (exit 3); approvals list, show, approve and deny act on it; watch
// shows the approval events; grants list and revoke the grants.
func TestApprovalCommands(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: approvalTools()})

	out := b.run(t, "call", "wipe", `{"path":"/srv"}`, "--session", "s1")
	require.Equal(t, toolctl.ExitPending, out.code, out.stderr)
	id := strings.TrimSpace(out.stdout)
	require.Regexp(t, `^[0-9A-Z]{26}$`, id)
	require.Contains(t, out.stderr, "awaiting approval: ")
	require.Contains(t, out.stderr, "the tool requires approval")
	require.Contains(t, out.stderr, "toolctl approvals approve "+id)

	out = b.run(t, "approvals", "list", "--state", "pending")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, id)
	require.Contains(t, out.stdout, "PENDING")
	out = b.run(t, "approvals", "list", "--state", "bogus")
	require.Equal(t, toolctl.ExitUsage, out.code)

	out = b.run(t, "approvals", "show", id)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, `{"path":"/srv"}`)
	require.Contains(t, out.stdout, "session=s1")

	out = b.run(t, "approvals", "approve", id, "--for", "session", "--args-pattern", "path=/srv/**", "--ttl", "1h", "--reason", "ok")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, "approved "+id)
	require.Contains(t, out.stdout, "tool wipe for session s1 (agent local) where path=/srv/**")
	out = b.run(t, "get", id, "--wait", "20s")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, "wiped /srv\n", out.stdout)
	out = b.run(t, "approvals", "approve", id)
	require.Equal(t, toolctl.ExitToolError, out.code, "decided already: %+v", out)
	require.Contains(t, out.stderr, "already decided")

	out = b.run(t, "watch", id)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Regexp(t, "AWAITING_APPROVAL .*approval="+id, out.stdout)
	require.Contains(t, out.stdout, "APPROVED by=local for=session grant=")

	// The grant covers the session's next call under /srv/**.
	out = b.run(t, "call", "wipe", `{"path":"/srv/x"}`, "--session", "s1")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	out = b.run(t, "-o", "json", "grants", "list")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	var grants struct {
		Grants []struct{ ID string }
	}
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &grants))
	require.Len(t, grants.Grants, 1)
	out = b.run(t, "grants", "revoke", grants.Grants[0].ID)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	out = b.run(t, "grants", "revoke", grants.Grants[0].ID)
	require.Equal(t, toolctl.ExitToolError, out.code)

	// Deny: a reason is required; the caller gets PERMISSION_DENIED.
	out = b.run(t, "submit", "wipe", `{"path":"/etc"}`)
	require.Equal(t, toolctl.ExitPending, out.code, out.stderr)
	id2 := strings.TrimSpace(out.stdout)
	out = b.run(t, "approvals", "deny", id2)
	require.Equal(t, toolctl.ExitUsage, out.code, "--reason is required")
	out = b.run(t, "approvals", "deny", id2, "--reason", "not /etc")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	out = b.run(t, "get", id2, "--wait", "20s")
	require.Equal(t, toolctl.ExitToolError, out.code)
	require.Contains(t, out.stderr, "PERMISSION_DENIED")
	require.Contains(t, out.stderr, "not /etc")

	// -o json: the parked call's answer with its approval id.
	out = b.run(t, "-o", "json", "call", "wipe", `{"path":"/x"}`)
	require.Equal(t, toolctl.ExitPending, out.code, out.stderr)
	require.Contains(t, out.stdout, `"CALL_STATE_AWAITING_APPROVAL"`)
	require.Contains(t, out.stdout, `"approvalId"`)
}

// Without the approve scope the approval commands are refused (exit 1).
func TestApprovalCommandsNeedTheScope(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: approvalTools(),
		Auth: identity.OpenAccess{Identity: identity.Identity{Tenant: "default", Agent: "bot", Scopes: []string{"tools"}}}})
	out := b.run(t, "approvals", "list")
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	require.Contains(t, out.stderr, `"approve" scope`)
}
