package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
)

// replica starts another dashboard replica in front of u's dispatcher,
// with the same secret, reading the installation over a connection of its
// own to natsURL (u.Env.URL, or a proxy's), checking keys with auth;
// change (if any) changes the Server before it starts.
func (u *uiStack) replica(t *testing.T, natsURL string, auth identity.Authenticator, change ...func(*Server)) *uiStack {
	t.Helper()
	nc, err := bus.Dial(bus.ConnConfig{URL: natsURL, Name: "ui-replica"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, nc, u.Env.Bus.Config, bus.Options{Signer: u.Env.Bus.Signer})
	require.NoError(t, err)
	ui, err := New(Config{Core: u.Dispatcher, Approvals: u.Dispatcher.Approvals(), Auth: auth, Registry: u.Registry,
		Streams: streamsOf(t, b), Secret: u.UI.cfg.Secret})
	require.NoError(t, err)
	for _, c := range change {
		c(ui)
	}
	require.NoError(t, ui.Start(ctx))
	mux := http.NewServeMux()
	ui.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		require.NoError(t, ui.Stop(context.Background()))
		srv.Close()
	})
	return &uiStack{Stack: u.Stack, UI: ui, Srv: srv}
}

// startReplicated starts a stack whose dashboard has a shared secret, as
// replicas behind one address do.
func startReplicated(t *testing.T) *uiStack {
	t.Helper()
	return startUIWith(t, nil, dispatch.Config{}, func(c *Config) { c.Secret = []byte(rand.Text() + rand.Text()) }, nil)
}

// cookie is the browser's session cookie value ("" = none).
func (b *browser) cookie() string {
	u, err := url.Parse(b.base + Prefix + "/")
	require.NoError(b.t, err)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == cookieName {
			return c.Value
		}
	}
	return ""
}

// with is a browser of u holding the session cookie value.
func (u *uiStack) with(t *testing.T, value string) *browser {
	b := u.newBrowser(t)
	b.setCookie(value)
	return b
}

// status is the status of the calls page: 200 with a session, 303 (to
// sign-in) without, 503 when the session cannot be checked.
func (b *browser) status() int {
	res, _ := b.get("/ui/calls")
	return res.StatusCode
}

// Signing out on one replica ends every session of the key that started
// before it, on every replica: a copy of the cookie and another browser's
// session alike, at once (the replicas read the record from the bucket's
// leader). A session signed in after the sign-out works everywhere.
func TestSignOutEndsEverySessionOfTheKeyOnEveryReplica(t *testing.T) {
	t.Parallel()
	one := startReplicated(t)
	two := one.replica(t, one.Env.URL, one.UI.cfg.Auth)

	b := one.signIn(t, readerKey)
	other := one.signIn(t, readerKey)
	admin := one.signIn(t, adminKey)
	copied := b.cookie()
	require.NotEmpty(t, copied)
	onOne, onTwo := one.with(t, copied), two.with(t, copied)
	require.Equal(t, http.StatusOK, onTwo.status(), "the replicas share the secret: the session holds on both")

	res, _ := b.act("/ui/signout", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/signin", res.Header.Get("Location"))
	require.Empty(t, b.cookie(), "the browser's cookie is cleared")

	require.Equal(t, http.StatusSeeOther, onOne.status(), "a copy of the cookie is refused on the replica that signed out")
	require.Equal(t, http.StatusSeeOther, onTwo.status(), "and on the other replica")
	res, _ = onTwo.post("/ui/calls/01M8GR9VRHGS68MS6ZSREPJ54X/cancel", url.Values{})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "and it takes no action either")
	require.Equal(t, http.StatusSeeOther, other.status(), "another browser's session of the key started before: ended too")
	require.Equal(t, http.StatusSeeOther, two.with(t, other.cookie()).status())
	require.Equal(t, http.StatusOK, admin.status(), "another key's session goes on")

	later := two.signIn(t, readerKey)
	require.Equal(t, http.StatusOK, later.status(), "a session signed in after the sign-out works")
	require.Equal(t, http.StatusOK, one.with(t, later.cookie()).status())

	// A replica started after the sign-out reads it from the bucket.
	three := one.replica(t, one.Env.URL, one.UI.cfg.Auth)
	require.Equal(t, http.StatusSeeOther, three.with(t, copied).status())
	require.Equal(t, http.StatusOK, three.with(t, later.cookie()).status())
}

// revocationRecords are the keys of the bucket's records.
func revocationRecords(t *testing.T, u *uiStack) []string {
	t.Helper()
	keys, err := u.Env.Bus.Revocations.ListKeys(t.Context())
	require.NoError(t, err)
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	return out
}

// Signing in and out in a loop cannot fill the bucket: it holds one
// record per key (a keyed hash, never the key), overwritten by each
// sign-out, with a TTL of the session lifetime and a margin for clock
// skew whatever the cookie had left.
func TestSignOutsKeepOneRecordPerKey(t *testing.T) {
	t.Parallel()
	u := startReplicated(t)
	for range 4 {
		b := u.signIn(t, readerKey)
		res, _ := b.act("/ui/signout", nil)
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
	}
	keys := revocationRecords(t, u)
	require.Len(t, keys, 1, "one record for the key")
	require.NotContains(t, keys[0], readerKey)

	st, err := u.Env.Bus.JS.Stream(t.Context(), "KV_"+u.Env.Bus.Config.RevocationsBucket())
	require.NoError(t, err)
	m, err := st.GetLastMsgForSubject(t.Context(), "$KV."+u.Env.Bus.Config.RevocationsBucket()+"."+keys[0])
	require.NoError(t, err)
	ttl, err := time.ParseDuration(m.Header.Get("Nats-TTL"))
	require.NoError(t, err, "the record has a TTL: %q", m.Header.Get("Nats-TTL"))
	require.Equal(t, u.UI.cfg.SessionTTL+revocationSkew, ttl)
}

// Without API keys (open access) every sign-in is the one open identity,
// whatever was typed: its sign-outs share one record, and a sign-out ends
// every open session started before it.
func TestOpenAccessSignOutsShareOneRecord(t *testing.T) {
	t.Parallel()
	u := startUIWith(t, nil, dispatch.Config{}, func(c *Config) {
		c.Secret = []byte(rand.Text() + rand.Text())
		c.Auth = identity.OpenAccess{Identity: identity.Default}
	}, nil)
	stays := u.signIn(t, "anything")
	for i := range 3 {
		b := u.signIn(t, rand.Text()[:i+4])
		res, _ := b.act("/ui/signout", nil)
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
	}
	require.Len(t, revocationRecords(t, u), 1, "one record for the open identity")
	require.Equal(t, http.StatusSeeOther, stays.status(), "an open session started before is ended")
	require.Equal(t, http.StatusOK, u.signIn(t, "").status(), "a new one works")
}

// A key removed from the key file (a replica started with the new file)
// ends its sessions there, whichever replica made them.
func TestRemovedKeyEndsItsSessionsOnEveryReplica(t *testing.T) {
	t.Parallel()
	one := startReplicated(t)
	b := one.signIn(t, readerKey)
	require.Equal(t, http.StatusOK, b.status())
	sum := sha256.Sum256([]byte(adminKey))
	f := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(f, []byte("keys:\n  - sha256: "+hex.EncodeToString(sum[:])+"\n    tenant: acme\n    agent: ops\n    scopes: [\"*\"]\n"), 0o600))
	without, err := identity.LoadAPIKeys(f)
	require.NoError(t, err)
	two := one.replica(t, one.Env.URL, without)
	require.Equal(t, http.StatusSeeOther, two.with(t, b.cookie()).status(), "the removed key's session ends")
	require.Equal(t, http.StatusOK, two.with(t, one.signIn(t, adminKey).cookie()).status(), "a kept key's goes on")
}

// With NATS unreachable a replica cannot tell whether a key signed out
// elsewhere: it refuses every session it does not know as signed out
// (503, fail closed) and serves them again once NATS is back. A sign-out
// there still clears the cookie and ends the key's sessions on that
// replica, and says (503) that it did not reach the others.
func TestSignOutWithoutNATSFailsClosedAndSaysSo(t *testing.T) {
	t.Parallel()
	one := startReplicated(t)
	nu, err := url.Parse(one.Env.URL)
	require.NoError(t, err)
	proxy := bustest.StartProxy(t, nu.Host)
	nu.Host = proxy.Addr()
	two := one.replica(t, nu.String(), one.UI.cfg.Auth)

	b := two.signIn(t, readerKey)
	admin := two.signIn(t, adminKey)
	copied, token := b.cookie(), b.csrf()
	require.Equal(t, http.StatusOK, admin.status())

	proxy.SetCut(true)
	waitFor(t, "the replica sees NATS gone", func() bool { return !two.UI.cfg.Streams.Conn.IsConnected() })
	res, _ := admin.get("/ui/calls")
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a session whose state is unknown is refused")
	require.Equal(t, "5", res.Header.Get("Retry-After"))

	res, body := b.post("/ui/signout", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Contains(t, body, "could not be recorded for the other replicas")
	require.Empty(t, b.cookie(), "the cookie is cleared all the same")
	require.Equal(t, http.StatusSeeOther, two.with(t, copied).status(), "this replica refuses the session")
	require.Equal(t, http.StatusOK, one.with(t, copied).status(), "as the page says, another replica does not know")

	proxy.SetCut(false)
	waitFor(t, "sessions served again once NATS is back", func() bool { return admin.status() == http.StatusOK })
	require.Equal(t, http.StatusSeeOther, two.with(t, copied).status())
}

// A live stream re-checks its session at each keep-alive: a sign-out (on
// any replica) ends it.
func TestSignOutEndsALiveStream(t *testing.T) {
	t.Parallel()
	one := startUIWith(t, nil, dispatch.Config{}, func(c *Config) { c.Secret = []byte(rand.Text() + rand.Text()) }, nil)
	two := one.replica(t, one.Env.URL, one.UI.cfg.Auth, func(s *Server) { s.keepAlive = 50 * time.Millisecond })
	b := one.signIn(t, readerKey)
	watcher := two.with(t, b.cookie())
	watcher.c.Timeout = 0
	res := openLive(t, watcher, "")
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, res.Body); done <- err }()

	out, _ := b.act("/ui/signout", nil)
	require.Equal(t, http.StatusSeeOther, out.StatusCode)
	select {
	case err := <-done:
		require.NoError(t, err, "the server ended the stream")
	case <-time.After(30 * time.Second):
		t.Fatal("the live stream outlived the sign-out")
	}
}

// A sign-out needs the session's CSRF token.
func TestSignOutNeedsTheCSRFToken(t *testing.T) {
	t.Parallel()
	u := startReplicated(t)
	b := u.signIn(t, readerKey)
	res, _ := b.post("/ui/signout", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Equal(t, http.StatusOK, b.status(), "the session goes on")
}
