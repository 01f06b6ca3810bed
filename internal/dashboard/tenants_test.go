package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A tenant's administrator is not the installation's: signed in with
// globex's admin key, acme's calls are not listed, not shown, not
// cancelled and acme's dead letters not retried — each answered as an id
// nobody minted is; the session says which reach it has. The
// installation scope, named in the key file, sees every tenant
// (issue 28, finding 1).
func TestATenantsAdminStaysInItsTenant(t *testing.T) {
	u := startUI(t, pageTools(), dispatch.Config{})
	sub, err := u.Dispatcher.Submit(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	waitFor(t, "the call is indexed", func() bool { _, ok := u.UI.index.Get(sub.CallID); return ok })
	_, seq := deadLetter(t, u, acmeBot, 1)

	b := u.signIn(t, globexAdmin)
	_, body := b.get("/ui/calls?tenant=acme")
	require.NotContains(t, body, sub.CallID)
	require.Contains(t, body, `data-testid="reach"`)
	require.Contains(t, body, "tenant globex")
	require.NotContains(t, body, "calls indexed", "no installation-wide count for a tenant's session")

	madeUp := ulid.Make().String()
	status := func(res *http.Response, body, id string) string {
		return fmt.Sprint(res.StatusCode, " ", strings.ReplaceAll(textOf(body), id, "ID"))
	}
	res, body := b.get("/ui/calls/" + madeUp)
	want := status(res, body, madeUp)
	require.True(t, strings.HasPrefix(want, "404"), want)
	res, body = b.get("/ui/calls/" + sub.CallID)
	require.Equal(t, want, status(res, body, sub.CallID), "another tenant's call answers as a made-up id")
	res, _ = b.act("/ui/calls/"+sub.CallID+"/cancel", url.Values{"reason": {"mine now"}})
	require.Equal(t, http.StatusNotFound, res.StatusCode, "not cancelled")
	res, _ = b.act(fmt.Sprintf("/ui/dlq/%d/retry", seq), nil)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "not retried")
	res, _ = b.get(fmt.Sprintf("/ui/dlq/%d", seq))
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	_, body = b.get("/ui/dlq")
	require.NotContains(t, body, fmt.Sprintf("/ui/dlq/%d", seq))
	bulk := func(n uint64) string {
		res, body := b.act("/ui/dlq/retry", url.Values{"confirm": {"1"}, "seq": {fmt.Sprint(n)}})
		text := strings.ReplaceAll(textOf(body), fmt.Sprintf("sequence %d", n), "sequence N")
		return fmt.Sprint(res.StatusCode, " ", strings.ReplaceAll(text, fmt.Sprintf("%ddlq:", n), "Ndlq:"))
	}
	require.Equal(t, bulk(seq+1000), bulk(seq), "a bulk retry of another tenant's letter fails as for no letter")
	g, err := u.Dispatcher.GetResult(t.Context(), acmeBot, sub.CallID, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_PENDING, g.State, "acme's call runs on, uncancelled")

	root := u.signIn(t, installKey)
	_, body = root.get("/ui/calls?tenant=acme")
	require.Contains(t, body, sub.CallID, "the installation scope sees every tenant")
	require.Contains(t, body, ">installation<")
}

// textOf is an HTML page's text without its tags' attributes (the CSRF
// token and nonces differ between pages).
func textOf(body string) string {
	i := strings.Index(body, "<main")
	if i < 0 {
		return body
	}
	body = body[i:]
	var b strings.Builder
	in := false
	for _, r := range body {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// After sign-in the dashboard goes only to a clean path under /ui: dot
// segments, escaped slashes and other sites go to the calls page (issue
// 28).
func TestSignInNextStaysUnderUI(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/calls?tenant=acme": "/ui/calls?tenant=acme",
		"/ui/dlq/12":            "/ui/dlq/12",
		"/ui/../../toolwire.v1.DispatcherService/ListTools": "/ui/calls",
		"/ui/..%2f..%2fmcp":         "/ui/calls",
		"/ui/%2e%2e/mcp":            "/ui/calls",
		"/ui/./calls":               "/ui/calls",
		"/ui/calls/":                "/ui/calls",
		"//evil.example/ui/calls":   "/ui/calls",
		"https://evil.example/ui/x": "/ui/calls",
		"/ui\\..\\mcp":              "/ui/calls",
		"/ui/signout":               "/ui/calls",
		"/mcp":                      "/ui/calls",
		"":                          "/ui/calls",
	} {
		require.Equal(t, want, safeNext(next), next)
	}
}
