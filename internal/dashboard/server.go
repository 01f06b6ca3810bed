package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
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
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui"

// Config configures a dashboard.
type Config struct {
	Dispatcher *dispatch.Dispatcher
	// Auth checks the API key a user signs in with, and again on every
	// request (a key removed from the key file signs its sessions out).
	Auth     identity.Authenticator
	Bus      *bus.Bus
	Registry *registry.Store
	// Secret seals the session cookie (32 bytes or more). Replicas behind
	// one address need the same secret; nil = a random one per process
	// (a session then holds on the replica that made it only).
	Secret []byte
	// IndexCalls is the most calls the calls index keeps (newest).
	// Default 1,000,000.
	IndexCalls int
	// SessionTTL is how long a sign-in lasts. Default 12h.
	SessionTTL time.Duration
	// TraceURL links a call's trace id to a tracing UI: an http(s) URL
	// with {trace_id} where the id goes (e.g.
	// https://jaeger.example/trace/{trace_id}); "" shows the id only.
	TraceURL string
	Logger   *slog.Logger
}

// Server is the dashboard: an http.Handler under Prefix.
type Server struct {
	cfg   Config
	log   *slog.Logger
	keys  *keys
	pages map[string]*template.Template
	mux   *http.ServeMux
	index *Index
	audit *audit.Source
	dlq   *dlq.Queue
	// letters is the DLQ as last read, shared by the pages (letters.go).
	letters *letters
	pools   *poolHistory
	csrfOK  *http.CrossOriginProtection

	// keepAlive is how often live streams send a keep-alive and check
	// their session (liveKeepAlive; tests shorten it).
	keepAlive time.Duration
	liveMu    sync.Mutex
	live      map[string]int // live streams open per key (tenant/agent)

	stopOnce sync.Once
	done     chan struct{} // closed by Stop: live streams end
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// New returns a dashboard over cfg's dispatcher and bus. Start feeds its
// calls index; Handle serves it.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dispatcher == nil || cfg.Auth == nil || cfg.Bus == nil || cfg.Registry == nil {
		return nil, errors.New("dashboard: Dispatcher, Auth, Bus and Registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkTraceURL(cfg.TraceURL); err != nil {
		return nil, err
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
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
	src, err := audit.Open(ctx, cfg.Bus.NC, cfg.Bus.Config.Prefix)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	q, err := dlq.Open(ctx, cfg.Bus.NC, cfg.Bus.Config.Prefix)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, keys: k, audit: src, dlq: q, done: make(chan struct{}),
		index:  NewIndex(cfg.Bus, cfg.Registry, cfg.IndexCalls, cfg.Logger.With("component", "ui-index")),
		csrfOK: http.NewCrossOriginProtection(), keepAlive: liveKeepAlive, live: map[string]int{}}
	s.letters = &letters{q: q}
	s.pools = newPoolHistory(s)
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Start feeds the calls index and samples the pools until Stop.
func (s *Server) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() { s.runIndex(ctx) })
	s.wg.Go(func() { s.pools.run(ctx) })
}

// runIndex feeds the calls index until ctx ends: a feed that fails (its
// stream reads failed for good: a long outage) starts again after a pause
// of 1s, doubling to 30s, and carries on from the newest call it has.
func (s *Server) runIndex(ctx context.Context) {
	pause := time.Second
	for {
		err := s.index.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Error("dashboard calls index stopped; starting it again", "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// Stop ends the live streams and the index, and waits for them. A nil
// Server (the dashboard turned off) does nothing.
func (s *Server) Stop() {
	if s == nil {
		return
	}
	s.stopOnce.Do(func() {
		close(s.done)
		if s.cancel != nil {
			s.cancel()
		}
	})
	s.wg.Wait()
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
	m.Handle("POST "+Prefix+"/signout", s.action(anyone, s.signOut))
	m.Handle("GET "+Prefix+"/{$}", http.RedirectHandler(Prefix+"/calls", http.StatusFound))

	m.Handle("GET "+Prefix+"/calls", s.page(s.callsPage))
	m.Handle("GET "+Prefix+"/calls/live", s.page(s.callsLive))
	m.Handle("GET "+Prefix+"/calls/{id}", s.page(s.callPage))
	m.Handle("POST "+Prefix+"/calls/{id}/cancel", s.action(admins, s.cancelCall))
	m.Handle("POST "+Prefix+"/calls/{id}/retry", s.action(admins, s.retryCall))

	m.Handle("GET "+Prefix+"/pools", s.page(s.poolsPage))

	m.Handle("GET "+Prefix+"/dlq", s.page(s.dlqPage))
	m.Handle("GET "+Prefix+"/dlq/{seq}", s.page(s.letterPage))
	m.Handle("POST "+Prefix+"/dlq/{seq}/retry", s.action(admins, s.retryLetter))
	m.Handle("POST "+Prefix+"/dlq/retry", s.action(admins, s.retryLetters))

	m.Handle("GET "+Prefix+"/tools", s.page(s.toolsPage))
	m.Handle("GET "+Prefix+"/tools/{name}", s.page(s.toolPage))
	m.Handle("POST "+Prefix+"/tools/{name}/approve", s.action(admins, s.approveTool))

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

// checkTraceURL refuses a TraceURL that is not an http(s) URL naming
// {trace_id}.
func checkTraceURL(t string) error {
	if t == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(t, "{trace_id}") {
		return fmt.Errorf("dashboard: the trace URL %q is not an http(s) URL with {trace_id} in it", t)
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
