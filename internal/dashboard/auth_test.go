package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
)

// revocable is an Authenticator whose keys can all be revoked at once, as
// when a key file loses them.
type revocable struct {
	identity.Authenticator
	revoked atomic.Bool
}

func (r *revocable) Authenticate(req *http.Request) (identity.Identity, error) {
	if r.revoked.Load() {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return r.Authenticator.Authenticate(req)
}

// A sign-in keeps the key sealed in an HttpOnly, SameSite=Strict cookie
// for /ui only; an unknown key gets 401 and no cookie; a cookie changed by
// a byte, sealed by another secret, or past its time is no session; a
// revoked key signs its sessions out at once.
func TestSignInKeepsTheKeySealed(t *testing.T) {
	t.Parallel()
	var auth *revocable
	u := startUIWith(t, nil, dispatch.Config{}, func(c *Config) {
		auth = &revocable{Authenticator: c.Auth}
		c.Auth = auth
	}, nil)

	anon := u.newBrowser(t)
	res, body := anon.post("/ui/signin", url.Values{"key": {"not-a-key"}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, body, "Unknown API key.")
	require.Empty(t, res.Cookies())
	res, _ = anon.post("/ui/signin", url.Values{"key": {strings.Repeat("k", maxKeyBytes+1)}})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	b := u.newBrowser(t)
	res, _ = b.post("/ui/signin", url.Values{"key": {readerKey}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	c := res.Cookies()[0]
	require.Equal(t, cookieName, c.Name)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/ui", c.Path)
	require.NotContains(t, c.Value, readerKey)
	res, _ = b.get("/ui/calls")
	require.Equal(t, http.StatusOK, res.StatusCode)

	for name, value := range map[string]string{
		"a byte changed": c.Value[:20] + string(c.Value[20]^1) + c.Value[21:],
		"another secret": mustKeys(t, "another secret, 32 bytes at least!").sealSession(session{Key: readerKey, Expires: time.Now().Add(time.Hour).Unix(), Nonce: "n"}),
		"expired":        u.UI.keys.sealSession(session{Key: readerKey, Expires: time.Now().Add(-time.Second).Unix(), Nonce: "n"}),
		"not base64":     "%%%",
	} {
		forged := u.newBrowser(t)
		forged.setCookie(value)
		res, _ := forged.get("/ui/calls")
		require.Equal(t, http.StatusSeeOther, res.StatusCode, name)
		require.True(t, strings.HasPrefix(res.Header.Get("Location"), "/ui/signin"), name)
	}

	auth.revoked.Store(true)
	res, _ = b.get("/ui/calls")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "a revoked key's session is over")
}

// After sign-in the browser goes where it was going, but never off the
// dashboard.
func TestSignInGoesOnlyToDashboardPages(t *testing.T) {
	t.Parallel()
	u := startUI(t, nil, dispatch.Config{})
	b := u.newBrowser(t)
	res, _ := b.get("/ui/tools")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/signin?next=%2Fui%2Ftools", res.Header.Get("Location"))
	for next, want := range map[string]string{
		"/ui/tools":              "/ui/tools",
		"//evil.example/ui/":     "/ui/calls",
		"https://evil.example/x": "/ui/calls",
		"/ui/\\evil":             "/ui/calls",
		"/ui/signout":            "/ui/calls",
		"":                       "/ui/calls",
	} {
		res, _ := u.newBrowser(t).post("/ui/signin", url.Values{"key": {readerKey}, "next": {next}})
		require.Equal(t, want, res.Header.Get("Location"), "next=%q", next)
	}
	// A sign-in posted from another site is refused (login CSRF).
	req, err := http.NewRequest(http.MethodPost, u.Srv.URL+"/ui/signin", strings.NewReader(url.Values{"key": {readerKey}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}

func mustKeys(t *testing.T, secret string) *keys {
	t.Helper()
	k, err := newKeys([]byte(secret))
	require.NoError(t, err)
	return k
}

// Without API keys (open access, loopback only) the sign-in page says so
// and an empty key signs in as the default identity; its actions still
// need the CSRF token.
func TestSignInWithOpenAccess(t *testing.T) {
	t.Parallel()
	u := startUIWith(t, nil, dispatch.Config{}, func(c *Config) { c.Auth = identity.OpenAccess{Identity: identity.Default} }, nil)
	b := u.newBrowser(t)
	_, body := b.get("/ui/signin")
	require.Contains(t, body, "No API keys are configured")
	res, _ := b.post("/ui/signin", url.Values{"key": {""}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, body = b.get("/ui/calls")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `data-testid="who">default/local<`)
	res, _ = b.post("/ui/calls/01M8GR9VRHGS68MS6ZSREPJ54X/cancel", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "no CSRF token")
}
