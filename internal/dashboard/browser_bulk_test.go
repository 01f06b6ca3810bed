package dashboard

import (
	"strconv"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch"
)

// The bulk actions in a real Chromium (testdata/dashboard-e2e/bulk.mjs):
// an admin bulk-cancels the held calls of the tenant after the dry run
// names exactly them (not another tenant's), and each cancel is
// requested; then purges the tenant's dead letters after the dry run
// names exactly them; each dry run and result page has no serious or
// critical axe-core violation; a read-only key is offered no bulk
// cancel.
func TestBrowserBulkActions(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	held := []string{hold(t, u, acmeBot), hold(t, u, acmeBot)}
	hold(t, u, globexBot)
	var letters []string
	for i := range 2 {
		_, seq := deadLetter(t, u, acmeBot, i)
		letters = append(letters, strconv.FormatUint(seq, 10))
	}
	deadLetter(t, u, globexBot, 3)
	runBrowser(t, "bulk.mjs", map[string]string{"BASE_URL": u.Srv.URL, "ADMIN_KEY": adminKey, "READER_KEY": readerKey,
		"HELD": strings.Join(held, ","), "LETTERS": strings.Join(letters, ",")})
	for _, seq := range letters {
		n, _ := strconv.ParseUint(seq, 10, 64)
		if !letterGone(t, u, n) {
			t.Errorf("dead letter %s was not purged", seq)
		}
	}
	for _, id := range held {
		if !cancelled(t, u, "acme", id) {
			t.Errorf("held call %s was not cancelled", id)
		}
	}
}
