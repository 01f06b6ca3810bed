package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
)

// NewRegistry returns a Prometheus registry holding the Go runtime and
// process collectors; components add their own metrics to it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves g in the Prometheus text (or OpenMetrics)
// format.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// ReadyFunc reports why a component is not ready, or nil when it is.
type ReadyFunc func(ctx context.Context) error

// Healthz answers 200 "ok" while the process serves HTTP at all.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
}

// Readyz answers 200 "ok" when ready returns nil within 5s, else 503 with
// the reason.
func Readyz(ready ReadyFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Mux returns a mux serving /healthz, /readyz (ready) and /metrics (g).
func Mux(ready ReadyFunc, g prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", Healthz())
	mux.Handle("/readyz", Readyz(ready))
	mux.Handle("/metrics", MetricsHandler(g))
	return mux
}

// ExtractHTTP wraps h so that a request carrying a W3C traceparent header
// is handled under that remote span context (the admission span becomes
// its child). Requests without one pass through untouched.
func ExtractHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" {
			r = r.WithContext(propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}
