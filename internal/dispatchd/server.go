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

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dashboard"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
)

// newServer returns the process's HTTP server: the API (behind auth; a
// caller's traceparent parents the admission span when tracing is on),
// the MCP endpoint (/mcp and its protected resource metadata; same auth),
// the dashboard (/ui, unless turned off),
// /healthz, /readyz (registry loaded, NATS connected, streams present) and
// /metrics, every route's body bounded while read, HTTP/1.1 and
// unencrypted HTTP/2 on one listener, a 10s ReadHeaderTimeout and no other
// timeout (long waits and watches are not cut off).
func newServer(d *dispatch.Dispatcher, auth identity.Authenticator, tracing bool, reg *registry.Store, b *bus.Bus, metrics *prometheus.Registry, mcp mcpserver.Config, ui *dashboard.Server) *http.Server {
	mux := http.NewServeMux()
	path, h := dispatch.NewService(d).Handler(auth)
	if tracing {
		h = telemetry.ExtractHTTP(h) // a caller's traceparent parents the admission span
	}
	mux.Handle(path, h)
	mcpserver.New(d, auth, mcp).Handle(mux)
	if ui != nil {
		ui.Handle(mux) // /ui: its own sign-in (the same API keys) and CSRF checks
	}
	mux.Handle("/healthz", telemetry.Healthz())
	mux.Handle("/readyz", telemetry.Readyz(func(ctx context.Context) error {
		select {
		case <-reg.Ready():
		default:
			return errors.New("registry loading")
		}
		if !b.NC.IsConnected() {
			return errors.New("nats disconnected")
		}
		return telemetry.StreamsPresent(ctx, b.Calls, b.Results, b.Events, b.DLQ, b.Retries)
	}))
	mux.Handle("/metrics", telemetry.MetricsHandler(metrics))
	// Every route's body is bounded while read, not only the API's.
	srv := &http.Server{Handler: dispatch.LimitBody(mux, d.Config().MaxRequestBytes), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
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
