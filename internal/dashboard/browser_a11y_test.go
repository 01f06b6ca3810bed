package dashboard

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
)

// Every page of the dashboard, with data on it, in light and in dark mode,
// has no accessibility violation of impact serious or critical by
// axe-core (testdata/dashboard-e2e/a11y.mjs): the sign-in page, the calls
// list, a finished call, a dead-lettered call, a parked call, approvals,
// dead letters and a letter, pools, tools and a tool, sessions and a
// session, limits.
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	acme := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	ok := call(t, u, acme, "echo", `{"text":"hello from the agent"}`)
	dead, seq := deadLetter(t, u, acme, 1)
	parked := park(t, u, acme, "/tmp/a11y")
	pages := []string{
		"calls", "calls/" + url.PathEscape(ok.CallId), "calls/" + url.PathEscape(dead), "calls/" + url.PathEscape(parked),
		"approvals", "dlq", "dlq/" + strconv.FormatUint(seq, 10),
		"pools", "tools", "tools/echo", "sessions", "session?id=s-1", "limits",
	}
	runBrowser(t, "a11y.mjs", map[string]string{"BASE_URL": u.Srv.URL, "ADMIN_KEY": installKey, "PAGES": strings.Join(pages, ",")})
}
