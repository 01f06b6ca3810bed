package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/shellquote"
)

// copyRequest is what a call page's "Copy as JSON" copies: the call's
// request as the page shows it, its arguments the audit record's
// (redacted: a secret argument is the placeholder the page shows, never
// its value).
type copyRequest struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Session   string          `json:"session,omitempty"`
	User      string          `json:"user,omitempty"`
	Run       string          `json:"run,omitempty"`
}

// copyTexts returns the texts of a call page's copy buttons for rec: its
// request as JSON (copyRequest, indented, not HTML-escaped) and the
// toolctl call command line that repeats it (flags --session, --user,
// --run first, then "--" and the tool and its arguments, so that a tool
// named like a flag stays the tool; each word quoted for a POSIX shell
// when it needs it, by shellquote.Quote). A word holding a control or format
// character (an escape sequence, a carriage return, a bidi override: a
// caller chooses its session, user and run) gets no command at all ("",
// the page shows no button): pasted into a terminal it could end a
// bracketed paste and run what follows. Arguments that are not JSON
// (none are: the audit writes JSON) are copied as {}.
func copyTexts(rec *audit.Record) (asJSON, asCommand string) {
	var args bytes.Buffer
	if len(rec.Arguments) == 0 || json.Compact(&args, rec.Arguments) != nil {
		args.Reset()
		args.WriteString("{}")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(copyRequest{Tool: rec.Tool, Arguments: args.Bytes(), Session: rec.Session, User: rec.User, Run: rec.Run}) != nil {
		b.Reset() // cannot happen: args is compact JSON
	}
	words := []string{"toolctl", "call"}
	for _, f := range []struct{ flag, v string }{{"--session", rec.Session}, {"--user", rec.User}, {"--run", rec.Run}} {
		if f.v != "" {
			words = append(words, f.flag, shellquote.Quote(f.v))
		}
	}
	words = append(words, "--", shellquote.Quote(rec.Tool), shellquote.Quote(args.String()))
	for _, w := range []string{rec.Tool, args.String(), rec.Session, rec.User, rec.Run} {
		if strings.IndexFunc(w, pasteUnsafe) >= 0 {
			return strings.TrimSuffix(b.String(), "\n"), ""
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), strings.Join(words, " ")
}

// pasteUnsafe reports a character a terminal may act on when pasted
// (C0 and C1 controls, DEL) or that shows text other than it is (Unicode
// format characters: bidi overrides, zero-width ones).
func pasteUnsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar
}

// curlRequest is the body of "Copy as curl": the call's CallRequest as
// Connect's JSON protocol takes it (protobuf JSON field names), its
// arguments as arguments_json, the audit record's bytes compacted, so
// that they reach the tool as recorded (the arguments field would pass
// numbers through float64).
type curlRequest struct {
	Tool          string `json:"tool"`
	ArgumentsJSON string `json:"arguments_json"`
	Session       string `json:"session,omitempty"`
	User          string `json:"user,omitempty"`
	Run           string `json:"run,omitempty"`
}

// curlServer is the API's address in the copied curl command: toolctl's
// variable and default (toolctl.DefaultServer).
const curlServer = `"${TOOLWIRE_SERVER:-http://127.0.0.1:8080}/toolwire.v1.DispatcherService/Call"`

// curlText returns the text of a call page's "Copy as curl": a curl
// command that repeats the call through the Connect API's Call
// (POST /toolwire.v1.DispatcherService/Call, JSON), with the API key as
// the placeholder $TOOLWIRE_API_KEY (the shell puts the user's own in;
// never a key in the text) and the server as $TOOLWIRE_SERVER, toolctl's
// variable, defaulting to toolctl's default. The body is curlRequest,
// from the audit record's redacted arguments (a secret is the page's
// placeholder, never its value), quoted as one shell word (shellquote.Quote).
// Like the toolctl command it is "" when a word holds a control or format
// character, and it carries no idempotency key.
func curlText(rec *audit.Record) string {
	var args bytes.Buffer
	if len(rec.Arguments) == 0 || json.Compact(&args, rec.Arguments) != nil {
		args.Reset()
		args.WriteString("{}")
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if enc.Encode(curlRequest{Tool: rec.Tool, ArgumentsJSON: args.String(), Session: rec.Session, User: rec.User, Run: rec.Run}) != nil {
		return "" // cannot happen: strings only
	}
	for _, w := range []string{rec.Tool, args.String(), rec.Session, rec.User, rec.Run} {
		if strings.IndexFunc(w, pasteUnsafe) >= 0 {
			return ""
		}
	}
	return strings.Join([]string{"curl", "-sS", "-H", shellquote.Quote("Content-Type: application/json"),
		"-H", `"Authorization: Bearer $TOOLWIRE_API_KEY"`, "--data-binary", shellquote.Quote(strings.TrimSuffix(body.String(), "\n")), curlServer}, " ")
}
