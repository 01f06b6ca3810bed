package dashboard

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
)

// cookieName is the session cookie. It holds the API key the user signed
// in with, sealed (AES-GCM: neither readable nor forgeable without the
// secret), and HttpOnly, SameSite=Strict, Path=/ui.
const cookieName = "toolwire_ui"

// maxKeyBytes bounds a key typed into the sign-in form; maxFormBytes
// bounds every form the dashboard reads.
const (
	maxKeyBytes  = 1024
	maxFormBytes = 64 << 10
)

// keys are the dashboard's secrets, derived from Config.Secret.
type keys struct {
	seal cipher.AEAD
	csrf []byte
	// revoke derives a sign-out record's key from an API key
	// (revocations.go).
	revoke []byte
}

func newKeys(secret []byte) (*keys, error) {
	if len(secret) < 32 {
		return nil, errors.New("dashboard: the secret must be 32 bytes or more")
	}
	derive := func(purpose string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("toolwire-ui/" + purpose))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("seal"))
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return &keys{seal: aead, csrf: derive("csrf"), revoke: derive("revoke")}, nil
}

// session is what the cookie seals.
type session struct {
	Key     string `json:"k"`
	Expires int64  `json:"e"` // Unix seconds
	Nonce   string `json:"n"` // binds the CSRF token to this sign-in
	// Issued is when the user signed in (Unix ns): a sign-out of the key
	// ends the sessions issued before it. A cookie without one (made
	// before sign-outs did this) counts as issued at 0.
	Issued int64 `json:"i,omitempty"`
}

func (k *keys) sealSession(s session) string {
	b, _ := json.Marshal(s)
	nonce := make([]byte, k.seal.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(k.seal.Seal(nonce, nonce, b, []byte(cookieName)))
}

func (k *keys) openSession(v string, now time.Time) (session, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < k.seal.NonceSize() {
		return session{}, false
	}
	b, err := k.seal.Open(nil, raw[:k.seal.NonceSize()], raw[k.seal.NonceSize():], []byte(cookieName))
	if err != nil {
		return session{}, false
	}
	var s session
	if json.Unmarshal(b, &s) != nil || now.Unix() >= s.Expires {
		return session{}, false
	}
	return s, true
}

// csrfToken is the token every action of a session carries.
func (k *keys) csrfToken(s session) string {
	m := hmac.New(sha256.New, k.csrf)
	m.Write([]byte(s.Nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// viewer is who is looking, as their key says, and what they may do.
type viewer struct {
	ID   identity.Identity
	CSRF string
	// Admin may act on calls and dead letters of its tenant and sees its
	// every agent; Approver may decide approvals; Installation sees every
	// tenant, the pools and the stores (identity.InstallationScope, named
	// in the key file: a tenant's admin is not the installation's);
	// InstallationAdmin (both) administers what every tenant shares: the
	// tool definitions — their executor configuration, approving a
	// changed MCP definition (identity.Identity.AdministersInstallation).
	Admin, Approver, Installation, InstallationAdmin bool
	// Visibility is the installation's agent visibility
	// (Config.AgentVisibility).
	Visibility identity.Visibility
}

// Tenant is the tenant the viewer's pages are limited to; "" = every
// tenant (identity.InstallationScope).
func (v *viewer) Tenant() string {
	if v.Installation {
		return ""
	}
	return v.ID.Tenant
}

// MaySee reports whether the viewer may see a call that agent of tenant
// made (identity.Identity.MaySeeCall, under the installation's agent
// visibility): one outside answers as one that does not exist.
func (v *viewer) MaySee(tenant, agent string) bool {
	return v.ID.MaySeeCall(tenant, agent, v.Visibility)
}

// Agent is the agent the viewer's calls pages are limited to; "" = every
// agent of the tenants it sees (identity.Identity.SeesEveryAgent).
func (v *viewer) Agent() string {
	if v.ID.SeesEveryAgent(v.Visibility) {
		return ""
	}
	return v.ID.Agent
}

// ReadOnly says the viewer can take no action at all.
func (v *viewer) ReadOnly() bool { return !v.Admin && !v.Approver }

func newViewer(id identity.Identity, csrf string, vis identity.Visibility) *viewer {
	return &viewer{ID: id, CSRF: csrf, Visibility: vis,
		Admin:        registry.HasScopes(id.Scopes, []string{identity.AdminScope}),
		Approver:     registry.HasScopes(id.Scopes, []string{approvalflow.ApproveScope}),
		Installation: id.CrossesTenants(), InstallationAdmin: id.AdministersInstallation()}
}

// who names the viewer in logs and records: tenant/agent.
func (v *viewer) who() string { return v.ID.Tenant + "/" + v.ID.Agent }

// authenticate checks key with the dispatcher's authenticator, as the API
// would check it as a bearer token.
func (s *Server) authenticate(r *http.Request, key string) (identity.Identity, error) {
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "/", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return s.cfg.Auth.Authenticate(req)
}

// viewerOf is the request's viewer, or nil without a valid session.
func (s *Server) viewerOf(r *http.Request) *viewer {
	v, _ := s.sessionOf(r)
	return v
}

// sessionOf is the request's viewer: nil without a session that is
// sealed by our secret, unexpired, not ended by a sign-out of its key (on
// any replica), and whose key the Authenticator still knows. When whether it was signed out
// cannot be told (errRevocationUnknown) it is refused too, and the error
// says why.
func (s *Server) sessionOf(r *http.Request) (*viewer, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, nil
	}
	ss, ok := s.keys.openSession(c.Value, time.Now())
	if !ok {
		return nil, nil
	}
	if ended, err := s.signedOut.ended(r.Context(), ss); ended || err != nil {
		return nil, err
	}
	id, err := s.authenticate(r, ss.Key)
	if err != nil {
		return nil, nil
	}
	return newViewer(id, s.keys.csrfToken(ss), s.cfg.AgentVisibility), nil
}

// unknownSession answers a request whose session cannot be checked now.
func (s *Server) unknownSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "5")
	s.render(w, r, http.StatusServiceUnavailable, "error", nil, "Unavailable", "", errorData{Status: http.StatusServiceUnavailable,
		Message: "The dashboard cannot reach NATS to check whether this session was signed out, so it is refused for now: try again shortly."})
}

// page wraps a GET handler: no session, and the browser goes to the
// sign-in page (a script's request gets 401).
func (s *Server) page(h func(http.ResponseWriter, *http.Request, *viewer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := s.sessionOf(r)
		if err != nil {
			s.unknownSession(w, r)
			return
		}
		if v == nil {
			if r.Header.Get("Accept") == "text/event-stream" {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, v)
	})
}

// need is the scope an action needs ("" = none beyond a session).
type need string

// Who may take an action.
const (
	anyone    need = ""
	admins    need = identity.AdminScope
	approvers need = approvalflow.ApproveScope
	// installationAdmins: the "admin" and "installation" scopes together.
	installationAdmins need = `"admin" and "installation"`
)

// refusal says why a key without n is refused.
func (n need) refusal() string {
	if n == installationAdmins {
		return `this needs the "admin" and "installation" scopes, which your key does not have together: it changes what every tenant shares`
	}
	return fmt.Sprintf("this needs the %q scope, which your key does not have", string(n))
}

// may says whether the viewer may take an action that needs n.
func (v *viewer) may(n need) bool {
	switch n {
	case admins:
		return v.Admin
	case approvers:
		return v.Approver
	case installationAdmins:
		return v.InstallationAdmin
	}
	return true
}

// action wraps a POST handler: the request must come from the dashboard's
// own pages (the browser's Sec-Fetch-Site/Origin, then the CSRF token of
// the session), with a session whose key may take the action. The body
// is bounded before it is parsed. Every action is logged with who took
// it; what it changes is recorded where the change is (the call's
// events, the approval, the registry).
func (s *Server) action(n need, h func(http.ResponseWriter, *http.Request, *viewer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.csrfOK.Check(r); err != nil {
			s.refuse(w, r, nil, http.StatusForbidden, "cross-origin request refused")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			s.refuse(w, r, nil, http.StatusBadRequest, "bad form: "+err.Error())
			return
		}
		v, err := s.sessionOf(r)
		if err != nil {
			s.unknownSession(w, r)
			return
		}
		if v == nil {
			s.refuse(w, r, nil, http.StatusUnauthorized, "sign in first")
			return
		}
		token := r.PostForm.Get("csrf")
		if token == "" {
			token = r.Header.Get("X-CSRF-Token")
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(v.CSRF)) != 1 {
			s.refuse(w, r, v, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
			return
		}
		if !v.may(n) {
			s.refuse(w, r, v, http.StatusForbidden, n.refusal())
			return
		}
		s.log.Info("dashboard action", "who", v.who(), "action", r.URL.Path)
		h(w, r, v)
	})
}

// refuse answers a refused request with a page saying why.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	if v != nil {
		s.log.Warn("dashboard action refused", "who", v.who(), "action", r.URL.Path, "status", status, "reason", msg)
	}
	s.render(w, r, status, "error", v, "Refused", "", errorData{Status: status, Message: msg})
}

type errorData struct {
	Status  int
	Message string
}

// signInPage shows the sign-in form.
func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	_, open := s.cfg.Auth.(identity.OpenAccess)
	s.render(w, r, http.StatusOK, "signin", nil, "Sign in", "", signInData{Next: safeNext(r.URL.Query().Get("next")), Open: open})
}

type signInData struct {
	Next    string
	Open    bool
	Message string
}

// signIn checks the key and keeps it in the session cookie.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if err := s.csrfOK.Check(r); err != nil {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	next := safeNext(r.PostForm.Get("next"))
	_, open := s.cfg.Auth.(identity.OpenAccess)
	var id identity.Identity
	err := errors.New("key too long")
	if len(key) <= maxKeyBytes {
		id, err = s.authenticate(r, key)
	}
	if err != nil {
		s.log.Warn("dashboard sign-in refused", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "signin", nil, "Sign in", "", signInData{Next: next, Open: open, Message: "Unknown API key."})
		return
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	now := time.Now()
	exp := now.Add(s.cfg.SessionTTL)
	ss := session{Key: key, Expires: exp.Unix(), Nonce: hex.EncodeToString(nonce), Issued: now.UnixNano()}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.keys.sealSession(ss),
		Path: Prefix, Expires: exp, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	s.log.Info("dashboard sign-in", "who", id.Tenant+"/"+id.Agent, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends every session of the key that started before it, in every
// browser and on every replica: it records the sign-out in the
// revocations bucket, which every replica reads (revocations.go), and
// clears the cookie. It needs the session's CSRF token, but not a key the
// Authenticator still knows nor a reachable NATS: a user can always sign
// out here. When the record cannot be written the cookie is cleared all
// the same and this replica ends the key's sessions, and the page says
// (503) that they may still work on the other replicas until they
// expire.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if err := s.csrfOK.Check(r); err != nil {
		s.refuse(w, r, nil, http.StatusForbidden, "cross-origin request refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, nil, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	var ss session
	c, err := r.Cookie(cookieName)
	ok := err == nil
	if ok {
		ss, ok = s.keys.openSession(c.Value, time.Now())
	}
	if ok && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.keys.csrfToken(ss))) != 1 {
		s.refuse(w, r, nil, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	if !ok { // no session to end
		http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
		return
	}
	who := "unknown key"
	if id, err := s.authenticate(r, ss.Key); err == nil {
		who = id.Tenant + "/" + id.Agent
	}
	if err := s.signedOut.revoke(r.Context(), ss); err != nil {
		s.log.ErrorContext(r.Context(), "dashboard sign-out not recorded for the other replicas", "who", who, "err", err)
		exp := time.Now().Add(s.cfg.SessionTTL).UTC().Format(time.RFC3339)
		s.render(w, r, http.StatusServiceUnavailable, "error", nil, "Sign-out incomplete", "", errorData{Status: http.StatusServiceUnavailable,
			Message: "Signed out in this browser and on this replica, but the sign-out could not be recorded for the other replicas (" + err.Error() +
				"): this key's sessions started before now may still work there until they expire (at the latest " + exp +
				"). Sign in and out again once NATS is reachable, or remove the key."})
		return
	}
	s.log.Info("dashboard sign-out", "who", who, "remote", r.RemoteAddr)
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

// secure says the cookie should be Secure: the request came over TLS, or
// through a proxy that says it did.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext is where to go after sign-in: a clean dashboard path (no dot
// segments, no escaped slashes or backslashes, no other site), with its
// query; anything else goes to the calls page.
func safeNext(next string) string {
	const home = Prefix + "/calls"
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil || u.RawPath != "" ||
		strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return home
	}
	clean := path.Clean(u.Path)
	if clean != u.Path || !strings.HasPrefix(clean, Prefix+"/") || slices.Contains([]string{Prefix + "/signin", Prefix + "/signout"}, clean) {
		return home
	}
	if u.RawQuery != "" {
		return clean + "?" + u.RawQuery
	}
	return clean
}
