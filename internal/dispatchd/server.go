package dispatchd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dashboard"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
)

// parts are the process's parts the HTTP server and its faces (the
// dashboard, the MCP endpoint) are built on.
type parts struct {
	d       *dispatch.Dispatcher
	auth    identity.Authenticator
	reg     *registry.Store
	b       *bus.Bus
	metrics *prometheus.Registry
	log     *slog.Logger
}

// newServer returns the process's HTTP server: the API (behind auth; a
// caller's traceparent parents the admission span when tracing is on),
// the MCP endpoint (/mcp and its protected resource metadata; same auth),
// the dashboard (/ui, unless turned off: ui nil),
// /healthz, /readyz (registry loaded, NATS connected, streams present) and
// /metrics, every route's body bounded while read, HTTP/1.1 and
// unencrypted HTTP/2 on one listener, a 10s ReadHeaderTimeout, a 2m
// IdleTimeout and no other timeout (long waits and watches are not cut
// off). Without its own IdleTimeout an idle keep-alive connection would
// be closed after the ReadHeaderTimeout, 10s: under load clients then
// open a connection per call again, and one that sends on a connection
// the server is closing gets an error instead of its answer. closeMCP
// stops the MCP endpoint's listening to the other replicas'
// notifications/cancelled: called once the server's Shutdown has returned.
func newServer(rc RunConfig, p parts, ui *dashboard.Server) (_ *http.Server, closeMCP func(), _ error) {
	mux := http.NewServeMux()
	svc, err := api.NewService(api.Config{Core: p.d, Approvals: p.d.Approvals(), Policies: p.d.PolicyOps(), Usage: p.d.LimitGate(),
		Profiles: rc.MCPProfiles})
	if err != nil {
		return nil, nil, err
	}
	path, h := svc.Handler(p.auth)
	if rc.TracerProvider != nil {
		h = telemetry.ExtractHTTP(h) // a caller's traceparent parents the admission span
	}
	mux.Handle(path, h)
	mcp, err := mcpserver.New(p.d, p.auth, mcpserver.Config{AllowedOrigins: rc.MCPAllowedOrigins, TaskAfter: rc.MCPTaskAfter,
		PublicURL: rc.MCPPublicURL, Profiles: rc.MCPProfiles, Tasks: p.b.Tasks, Bus: p.b, Logger: p.log.With("component", "mcp")})
	if err != nil {
		return nil, nil, err
	}
	mcp.Handle(mux)
	if ui != nil {
		ui.Handle(mux) // /ui: its own sign-in (the same API keys) and CSRF checks
	}
	mux.Handle("/healthz", telemetry.Healthz())
	mux.Handle("/readyz", telemetry.Readyz(func(ctx context.Context) error {
		select {
		case <-p.reg.Ready():
		default:
			return errors.New("registry loading")
		}
		if !p.b.NC.IsConnected() {
			return errors.New("nats disconnected")
		}
		return telemetry.StreamsPresent(ctx, p.b.Calls, p.b.Results, p.b.Events, p.b.DLQ, p.b.Retries)
	}))
	mux.Handle("/metrics", telemetry.MetricsHandler(p.metrics))
	// Every route's body is bounded while read, not only the API's.
	srv := &http.Server{Handler: api.LimitBody(mux, p.d.Config().MaxRequestBytes), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv, mcp.Close, nil
}

// authenticator returns the API key check of file, or open access as
// identity.Default without one (with a warning when addr is not
// loopback).
func authenticator(file, addr string, log *slog.Logger) (identity.Authenticator, error) {
	if file != "" {
		return identity.LoadAPIKeys(file)
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("no API keys configured: every caller is the default tenant with every scope; set --api-keys on a shared network", "http", addr)
	}
	return identity.OpenAccess{Identity: identity.Default}, nil
}

// redactedURL is u without the password of its user info.
func redactedURL(u string) string {
	if u == "" {
		return ""
	}
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "redacted" + u[i:]
		}
	}
	return u
}
