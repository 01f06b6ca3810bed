package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
)

// shellWords splits s into words as a POSIX shell would for the subset
// the copied commands use (bare words, a backslash-escaped character,
// single quotes, double quotes with
// \", \\, \$ and \` escapes and $NAME and ${NAME:-default} expanded from
// env), without running a shell. Anything else (an unquoted special
// character, an unknown variable, an unclosed quote) is an error.
func shellWords(s string, env map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // a word is open
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unclosed single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a backslash at the end")
			}
			w.WriteByte(s[i+1])
			i, in = i+1, true
		case c == '"':
			n, err := doubleQuoted(s[i+1:], env, &w)
			if err != nil {
				return nil, err
			}
			i, in = i+n, true
		case strings.IndexByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+=", c) >= 0:
			w.WriteByte(c)
			in = true
		default:
			return nil, fmt.Errorf("unquoted %q at %d", c, i)
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

var shellVarRe = regexp.MustCompile(`^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})`)

// doubleQuoted reads a double-quoted string's body from s into w and
// returns how many bytes it took, its closing quote included.
func doubleQuoted(s string, env map[string]string, w *strings.Builder) (int, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
				w.WriteByte(s[i+1])
				i++
				continue
			}
			w.WriteByte(c)
		case '`':
			return 0, errors.New("a command substitution")
		case '$':
			m := shellVarRe.FindStringSubmatch(s[i:])
			if m == nil {
				return 0, fmt.Errorf("a $ that is no variable at %d", i)
			}
			name := m[1] + m[2]
			v, ok := env[name]
			if !ok && strings.Contains(m[0], ":-") {
				v, ok = m[3], true
			}
			if !ok {
				return 0, fmt.Errorf("variable %s not set", name)
			}
			w.WriteString(v)
			i += len(m[0]) - 1
		default:
			w.WriteByte(c)
		}
	}
	return 0, errors.New("unclosed double quote")
}

// curlRequestOf builds the HTTP request the curl command words describe
// (-sS; -H header; --data-binary body; the URL), refusing any other
// option: the test runs what the command says, without a shell.
func curlRequestOf(t *testing.T, words []string) *http.Request {
	t.Helper()
	require.Equal(t, "curl", words[0])
	var url, body string
	hdr := http.Header{}
	for i := 1; i < len(words); i++ {
		switch words[i] {
		case "-sS":
		case "-H":
			i++
			k, v, ok := strings.Cut(words[i], ": ")
			require.True(t, ok, "header %q", words[i])
			hdr.Add(k, v)
		case "--data-binary":
			i++
			body = words[i]
		default:
			require.False(t, strings.HasPrefix(words[i], "-"), "an option the test does not know: %q", words[i])
			require.Empty(t, url, "one URL")
			url = words[i]
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = hdr
	return req
}

var copyCurlRe = regexp.MustCompile(`data-copy="([^"]*)" data-copy-what="the curl command"`)

// A call page's "Copy as curl" is a curl command that, run (parsed here
// as a POSIX shell would, with the user's $TOOLWIRE_API_KEY and
// $TOOLWIRE_SERVER, and sent, without a shell), repeats the call through
// the API: a new call of the same tool with the same argument bytes,
// session, user and run. Its body is exactly the call's request; the key
// is never in it, nor a secret argument's value.
func TestCopyAsCurlRepeatsTheCall(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	const args = `{"text":"it's \"quoted\" $HOME ` + "`id`" + ` \\ and ${X} — ünï"}`
	orig := call(t, u, acmeBot, "echo", args)
	require.Nil(t, orig.Response.GetError())
	waitFor(t, "the index has the call", func() bool { _, ok := u.UI.index.Get(orig.CallId); return ok })
	reader := u.signIn(t, readerKey)
	_, page := reader.get("/ui/calls/" + orig.CallId)
	m := copyCurlRe.FindStringSubmatch(page)
	require.NotNil(t, m, "the call page has Copy as curl")
	cmd := html.UnescapeString(m[1])
	require.Contains(t, cmd, `"Authorization: Bearer $TOOLWIRE_API_KEY"`, "the key is a placeholder")
	for _, k := range []string{readerKey, adminKey} {
		require.NotContains(t, cmd, k)
	}

	words, err := shellWords(cmd, map[string]string{"TOOLWIRE_API_KEY": adminKey, "TOOLWIRE_SERVER": u.URL})
	require.NoError(t, err, cmd)
	req := curlRequestOf(t, words)
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(body, &sent))
	require.Equal(t, map[string]any{"tool": "echo", "arguments_json": args, "session": "s-acme"}, sent, "the body is exactly the call's request")
	req.Body = io.NopCloser(strings.NewReader(string(body)))

	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(out))
	var answer struct {
		CallID string `json:"callId"`
	}
	require.NoError(t, json.Unmarshal(out, &answer))
	require.NotEmpty(t, answer.CallID, string(out))
	require.NotEqual(t, orig.CallId, answer.CallID, "a new call")
	waitFor(t, "the index has the repeated call", func() bool { _, ok := u.UI.index.Get(answer.CallID); return ok })
	e0, _ := u.UI.index.Get(orig.CallId)
	e1, _ := u.UI.index.Get(answer.CallID)
	r0, err := u.UI.audit.One(t.Context(), e0.Seq)
	require.NoError(t, err)
	r1, err := u.UI.audit.One(t.Context(), e1.Seq)
	require.NoError(t, err)
	require.Equal(t, string(r0.Arguments), string(r1.Arguments), "the same argument bytes")
	require.Equal(t, []string{r0.Tool, r0.Session, r0.User, r0.Run}, []string{r1.Tool, r1.Session, r1.User, r1.Run})
	require.Equal(t, "ops", r1.Agent, "made with the key the user put in $TOOLWIRE_API_KEY")

	// A secret argument is copied as the page shows it, never its value.
	secret := call(t, u, acmeBot, "login", `{"user":"ann","password":"never-shown"}`)
	waitFor(t, "the index has the login call", func() bool { _, ok := u.UI.index.Get(secret.CallId); return ok })
	_, page = reader.get("/ui/calls/" + secret.CallId)
	m = copyCurlRe.FindStringSubmatch(page)
	require.NotNil(t, m)
	require.NotContains(t, html.UnescapeString(m[1]), "never-shown")
	require.Contains(t, html.UnescapeString(m[1]), `[REDACTED]`)
}
