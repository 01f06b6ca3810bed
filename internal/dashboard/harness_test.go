package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
)

// The keys of a test stack: tenant acme, one per role.
const (
	readerKey   = "reader-key-0123456789"
	adminKey    = "admin-key-0123456789"
	approverKey = "approver-key-0123456789"
	otherKey    = "other-tenant-key-0123456789" // tenant globex, read-only
	globexAdmin = "globex-admin-key-0123456789" // tenant globex, admin: of globex only
	installKey  = "installation-key-0123456789" // tenant acme, "*" and installation: every tenant
)

// uiStack is a real toolwire (embedded NATS, dispatcher, in-process
// worker) with the dashboard in front, on an httptest server.
type uiStack struct {
	*dispatchtest.Stack
	UI  *Server
	Srv *httptest.Server
}

// startUI starts a stack serving tools (nil = the built-in tools) with
// the four keys above.
func startUI(t *testing.T, tools []*tool.Tool, cfg dispatch.Config) *uiStack {
	t.Helper()
	return startUIWith(t, tools, cfg, nil, nil)
}

// startUIWith is startUI with changes to the dashboard's Config before
// New and to the Server before it starts (either may be nil).
func startUIWith(t *testing.T, tools []*tool.Tool, cfg dispatch.Config, changeConfig func(*Config), changeServer func(*Server)) *uiStack {
	t.Helper()
	auth := testKeys(t)
	st := dispatchtest.Start(t, dispatchtest.Options{Tools: tools, Auth: auth, Dispatcher: cfg})
	ctx := context.Background()
	c := Config{Core: st.Dispatcher, Approvals: st.Dispatcher.Approvals(), Auth: auth, Registry: st.Registry, Streams: streamsOf(t, st.Env.Bus)}
	c.Streams.DLQ.CheckWith(st.Dispatcher.CheckRetry) // as dispatchd does
	if changeConfig != nil {
		changeConfig(&c)
	}
	ui, err := New(c)
	require.NoError(t, err)
	if changeServer != nil {
		changeServer(ui)
	}
	require.NoError(t, ui.Start(ctx))
	mux := http.NewServeMux()
	ui.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		require.NoError(t, ui.Stop(ctx)) // ends live streams before the server waits for them
		srv.Close()
	})
	select {
	case <-ui.index.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the calls index never caught up")
	}
	return &uiStack{Stack: st, UI: ui, Srv: srv}
}

// streamsOf opens the dashboard's streams of the installation b, as
// dispatchd does.
func streamsOf(t *testing.T, b *bus.Bus) Streams {
	t.Helper()
	src, err := audit.Open(t.Context(), b.NC, b.Config.Prefix)
	require.NoError(t, err)
	q, err := dlq.Open(t.Context(), b.NC, b.Config.Prefix)
	require.NoError(t, err)
	q.SignWith(b.Signer) // a retry's admission record is the dispatcher's
	return Streams{Calls: b.Calls, Results: b.Results, Events: b.Events, Registry: b.Registry, Subjects: b.Subjects, Audit: src, DLQ: q,
		Revocations: b.Revocations, Conn: b.NC}
}

// testKeys writes a key file with the stack's keys and loads it.
func testKeys(t *testing.T) *identity.APIKeys {
	t.Helper()
	line := func(key, tenant, agent, scopes string) string {
		sum := sha256.Sum256([]byte(key))
		return fmt.Sprintf("  - sha256: %s\n    tenant: %s\n    agent: %s\n    scopes: %s\n", hex.EncodeToString(sum[:]), tenant, agent, scopes)
	}
	f := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(f, []byte("keys:\n"+
		line(readerKey, "acme", "viewer", "[]")+
		line(adminKey, "acme", "ops", `["*"]`)+
		line(approverKey, "acme", "lead", "[approve]")+
		line(otherKey, "globex", "viewer", "[]")+
		line(globexAdmin, "globex", "ops", "[admin]")+
		line(installKey, "acme", "root", `["*", installation]`)), 0o600))
	k, err := identity.LoadAPIKeys(f)
	require.NoError(t, err)
	return k
}

// browser is a signed-in HTTP client of the dashboard (cookies kept,
// redirects not followed, so that a test sees them).
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

// newBrowser returns a client of the dashboard that has not signed in.
func (u *uiStack) newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: u.Srv.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// setCookie makes value the browser's session cookie.
func (b *browser) setCookie(value string) {
	u, err := url.Parse(b.base + Prefix + "/")
	require.NoError(b.t, err)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: value, Path: Prefix}})
}

// signIn signs in with key and returns the client.
func (u *uiStack) signIn(t *testing.T, key string) *browser {
	t.Helper()
	b := u.newBrowser(t)
	res, _ := b.post("/ui/signin", url.Values{"key": {key}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "sign-in with a known key")
	return b
}

// get fetches path and returns the response and its body.
func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	res, err := b.c.Get(b.base + path)
	require.NoError(b.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return res, string(body)
}

// post submits a form as the dashboard's pages do (same origin).
func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return res, string(body)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the session's CSRF token, read from a page as a user's browser
// has it.
func (b *browser) csrf() string {
	b.t.Helper()
	_, body := b.get("/ui/calls")
	m := csrfRe.FindStringSubmatch(body)
	require.NotNil(b.t, m, "no CSRF token on the calls page")
	return m[1]
}

// act posts an action with the session's CSRF token.
func (b *browser) act(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf())
	return b.post(path, form)
}

// waitFor polls cond every 20ms until it holds, failing after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 20*time.Millisecond, what)
}
