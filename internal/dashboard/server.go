package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/startstop"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui"

// Server is the dashboard: an http.Handler under Prefix, and a
// startstop.Service (its calls index's feed and the pools' sampling).
type Server struct {
	cfg   Config
	log   *slog.Logger
	keys  *keys
	pages map[string]*template.Template
	mux   *http.ServeMux
	index *callindex.Index
	// signers decides which results are believed (internal/believed).
	signers *signing.Keyring
	// feed feeds index; services are what Start starts (the feed, then
	// the pool history's sampling), stopped in reverse.
	feed     *callindex.Feed
	services *startstop.Group
	audit    *audit.Source
	dlq      *dlq.Queue
	// letters is the DLQ as last read, shared by the pages (letters.go).
	letters *letters
	pools   *poolHistory
	csrfOK  *http.CrossOriginProtection
	// signedOut are the sign-outs every replica honours (revocations.go).
	signedOut *revocations
	// bulk are the sessions running a bulk action (one each: bulk.go).
	bulk bulkRuns

	// keepAlive is how often live streams send a keep-alive and check
	// their session (liveKeepAlive; tests shorten it).
	keepAlive time.Duration
	liveMu    sync.Mutex
	live      map[string]int // live streams open per key (tenant/agent)

	stopOnce sync.Once
	done     chan struct{} // closed by Stop: live streams end
}

// New returns a dashboard configured by cfg (WithDefaults, then Validate:
// an invalid cfg is refused, naming the field). Start feeds its calls
// index; Handle serves it.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	secret := cfg.Secret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	k, err := newKeys(secret)
	if err != nil {
		return nil, err
	}
	st := cfg.Streams
	signers := bus.NewKeyring(st.Registry, nil, "")
	signers.EventsWith(bus.EventsReader(st.Conn, st.Events, st.Subjects))
	if st.ListPoolKeys {
		signers.ListPoolKeys()
	}
	index, err := callindex.New(callindex.Config{Streams: callindex.Streams{Calls: st.Calls, Results: st.Results, Subjects: st.Subjects, Keys: signers, Events: st.Events},
		Specs: cfg.Registry, Max: cfg.IndexCalls, Logger: cfg.Logger.With("component", "ui-index")})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, keys: k, signers: signers, audit: st.Audit, dlq: st.DLQ, done: make(chan struct{}), index: index,
		feed: callindex.NewFeed(index), csrfOK: http.NewCrossOriginProtection(), keepAlive: liveKeepAlive, live: map[string]int{}}
	s.letters = &letters{q: st.DLQ}
	s.pools = newPoolHistory(s)
	if s.signedOut, err = newRevocations(cfg, k.revoke); err != nil {
		return nil, err
	}
	s.services = startstop.NewGroup(startstop.Named{Name: "calls index feed", Service: s.feed},
		startstop.Named{Name: "pool history", Service: startstop.NewLoop(func(ctx context.Context) { s.pools.run(ctx) })})
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

var _ startstop.Service = (*Server)(nil)

// Start feeds the calls index (callindex.Feed: a run that fails starts
// again after a pause) and samples the pools, until Stop. It returns once
// both run.
func (s *Server) Start(ctx context.Context) error { return s.services.Start(ctx) }

// Stop ends the live streams, then the pool history and the calls
// index's feed, and waits for them (within ctx). A nil Server (the dashboard
// turned off) does nothing.
func (s *Server) Stop(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.stopOnce.Do(func() { close(s.done) })
	return s.services.Stop(ctx)
}

// Handle registers the dashboard on mux under Prefix.
func (s *Server) Handle(mux *http.ServeMux) {
	mux.Handle(Prefix+"/", s)
	mux.Handle(Prefix, http.RedirectHandler(Prefix+"/", http.StatusFound))
}

// ServeHTTP serves the dashboard with its security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// routes builds the dashboard's routes. Every page needs a session;
// every POST also needs its CSRF token (auth.go).
func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", cacheStatic(http.FileServerFS(static))))
	m.HandleFunc("GET "+Prefix+"/signin", s.signInPage)
	m.HandleFunc("POST "+Prefix+"/signin", s.signIn)
	m.HandleFunc("POST "+Prefix+"/signout", s.signOut)
	m.Handle("GET "+Prefix+"/{$}", http.RedirectHandler(Prefix+"/calls", http.StatusFound))

	m.Handle("GET "+Prefix+"/calls", s.page(s.callsPage))
	m.Handle("GET "+Prefix+"/calls/live", s.page(s.callsLive))
	m.Handle("GET "+Prefix+"/calls/{id}", s.page(s.callPage))
	m.Handle("POST "+Prefix+"/calls/cancel", s.action(admins, s.cancelCalls))
	m.Handle("POST "+Prefix+"/calls/{id}/cancel", s.action(admins, s.cancelCall))
	m.Handle("POST "+Prefix+"/calls/{id}/retry", s.action(admins, s.retryCall))

	m.Handle("GET "+Prefix+"/sessions", s.page(s.sessionsPage))
	m.Handle("GET "+Prefix+"/session", s.page(s.sessionPage))

	m.Handle("GET "+Prefix+"/pools", s.page(s.poolsPage))

	m.Handle("GET "+Prefix+"/dlq", s.page(s.dlqPage))
	m.Handle("GET "+Prefix+"/dlq/{seq}", s.page(s.letterPage))
	m.Handle("POST "+Prefix+"/dlq/{seq}/retry", s.action(admins, s.retryLetter))
	m.Handle("POST "+Prefix+"/dlq/retry", s.action(admins, s.retryLetters))
	m.Handle("POST "+Prefix+"/dlq/purge", s.action(admins, s.purgeLetters))

	m.Handle("GET "+Prefix+"/tools", s.page(s.toolsPage))
	m.Handle("GET "+Prefix+"/tools/{name}", s.page(s.toolPage))
	m.Handle("POST "+Prefix+"/tools/{name}/approve", s.action(installationAdmins, s.approveTool))
	m.Handle("POST "+Prefix+"/pools/{pool}/pause", s.action(installationAdmins, s.pausePool))
	m.Handle("POST "+Prefix+"/pools/{pool}/resume", s.action(installationAdmins, s.resumePool))

	m.Handle("GET "+Prefix+"/approvals", s.page(s.approvalsPage))
	m.Handle("POST "+Prefix+"/approvals/{id}/approve", s.action(approvers, s.approveCall))
	m.Handle("POST "+Prefix+"/approvals/{id}/deny", s.action(approvers, s.denyCall))

	m.Handle("GET "+Prefix+"/limits", s.page(s.limitsPage))
	m.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	s.mux = m
}

// cacheStatic lets browsers keep the embedded assets for five minutes.
func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// checkTraceURL refuses a Config.TraceURL that is not an http(s) URL naming
// {trace_id}.
func checkTraceURL(t string) error {
	if t == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(t, "{trace_id}") {
		return fmt.Errorf("dashboard: TraceURL %q is not an http(s) URL with {trace_id} in it", t)
	}
	return nil
}

// traceLink is the link to trace id in the tracing UI; "" without one.
func (s *Server) traceLink(id string) string {
	if s.cfg.TraceURL == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(s.cfg.TraceURL, "{trace_id}", url.PathEscape(id))
}
