package dashboard

import (
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch"
)

// The bulk actions in a real Chromium (testdata/dashboard-e2e/bulk.mjs):
// an admin bulk-cancels the held calls of the tenant after the dry run
// names exactly them (not another tenant's), and each cancel is
// requested; a read-only key is offered no bulk cancel.
func TestBrowserBulkActions(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	held := []string{hold(t, u, acmeBot), hold(t, u, acmeBot)}
	hold(t, u, globexBot)
	runBrowser(t, "bulk.mjs", map[string]string{"BASE_URL": u.Srv.URL, "ADMIN_KEY": adminKey, "READER_KEY": readerKey,
		"HELD": strings.Join(held, ",")})
	for _, id := range held {
		if !cancelled(t, u, "acme", id) {
			t.Errorf("held call %s was not cancelled", id)
		}
	}
}
