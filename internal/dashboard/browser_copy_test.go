package dashboard

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
)

// A call page's "Copy as JSON", "Copy as command" and "Copy as curl" put
// the call's request on the clipboard in a real Chromium
// (testdata/dashboard-e2e/copy.mjs): the arguments as the page shows them
// (the secret one redacted), a toolctl call command line and a curl
// command (the key as $TOOLWIRE_API_KEY) whose argument with a single
// quote is quoted for the shell.
func TestBrowserCopyCall(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	acme := identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	r := call(t, u, acme, "login", `{"user":"o'brien","password":"never-shown"}`)
	require.Nil(t, r.Response.GetError())
	runBrowser(t, "copy.mjs", map[string]string{"BASE_URL": u.Srv.URL, "READER_KEY": readerKey, "CALL_ID": r.CallId, "SECRET": "never-shown",
		"WANT_JSON": `{
  "tool": "login",
  "arguments": {
    "password": "[REDACTED]",
    "user": "o'brien"
  },
  "session": "s-acme"
}`,
		"WANT_COMMAND": `toolctl call --session s-acme -- login '{"password":"[REDACTED]","user":"o'\''brien"}'`,
		"WANT_CURL": `curl -sS -H 'Content-Type: application/json' -H "Authorization: Bearer $TOOLWIRE_API_KEY" --data-binary ` +
			`'{"tool":"login","arguments_json":"{\"password\":\"[REDACTED]\",\"user\":\"o'\''brien\"}","session":"s-acme"}' ` +
			`"${TOOLWIRE_SERVER:-http://127.0.0.1:8080}/toolwire.v1.DispatcherService/Call"`})
}
