package dashboard

import (
	"testing"

	"github.com/toolwire/toolwire/internal/dispatch"
)

// Finding 9's basics in a real Chromium (testdata/dashboard-e2e/shift.mjs):
// local time with a remembered UTC toggle, dark mode following the
// system, a skip link, and the calls list by keyboard.
func TestBrowserShiftBasics(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	for range 3 {
		call(t, u, acmeBot, "echo", `{"text":"a call"}`)
	}
	waitFor(t, "the index has the calls", func() bool { return u.UI.index.Stats().Entries >= 3 })
	runBrowser(t, "shift.mjs", map[string]string{"BASE_URL": u.Srv.URL, "READER_KEY": readerKey})
}
