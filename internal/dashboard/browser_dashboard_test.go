package dashboard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// dashboardShots are the screenshots TestBrowserDashboard takes: one of
// every page (make dashboard-screenshots writes them to docs/images).
var dashboardShots = []string{"signin", "calls", "calls-filtered", "call", "call-cancelled", "approvals", "call-approved",
	"dlq", "dlq-confirm", "dlq-result", "tools", "tool-diff", "pools", "limits", "read-only"}

// The dashboard in a real Chromium against a real dispatcher and worker
// (testdata/dashboard-e2e/dashboard.mjs): sign in, a call appears live,
// filter, its timeline, cancel a running call, approve a parked call and
// watch it finish, bulk-retry two dead letters after the dry-run count,
// diff two versions of a tool, every page's screenshot; a read-only key
// finds every action disabled and refused, and an action without its
// CSRF token is refused.
func TestBrowserDashboard(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	acme := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	call(t, u, acme, "echo", `{"text":"hello from the agent"}`)
	call(t, u, acme, "login", `{"user":"ann","password":"never-shown"}`)
	deadLetter(t, u, acme, 1)
	deadLetter(t, u, acme, 2)
	report := func(desc, schema string) *toolwirev1.ToolSpec {
		return &toolwirev1.ToolSpec{Name: "report", Provider: "reports", Description: desc, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
			Config:          &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{Method: "POST", UrlTemplate: "https://reports.example/run"}},
			InputSchemaJson: schema}
	}
	_, err := registry.Publish(t.Context(), u.Env.Bus.Registry, []*toolwirev1.ToolSpec{
		report("Counts the month's tickets.", `{"type":"object","properties":{"month":{"type":"string"}}}`)})
	require.NoError(t, err)
	v2, err := registry.Publish(t.Context(), u.Env.Bus.Registry, []*toolwirev1.ToolSpec{
		report("Counts the tickets of a month of a year.", `{"type":"object","properties":{"month":{"type":"string"},"year":{"type":"integer"}}}`)})
	require.NoError(t, err)
	waitFor(t, "the registry has report's second version", func() bool {
		e, err := u.Registry.Get("report")
		return err == nil && e.Spec.Version == v2[0].Version
	})

	shots := os.Getenv("DASHBOARD_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	runBrowser(t, "dashboard.mjs", map[string]string{"BASE_URL": u.Srv.URL, "API_URL": u.URL, "SHOT_DIR": shots,
		"ADMIN_KEY": adminKey, "APPROVER_KEY": approverKey, "READER_KEY": readerKey, "INSTALL_KEY": installKey})
	for _, name := range dashboardShots {
		_, err := os.Stat(filepath.Join(shots, name+".png"))
		require.NoError(t, err, "screenshot %s", name)
	}
}
