package dispatchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

// startWorkers builds and starts the in-process workers, none without
// pools (nil), their metrics registered on metrics: from
// rc.WorkerConfig, or the default configuration (every built-in example;
// an executor that cannot start on this host is reported and its calls
// answered, the others still served).
func startWorkers(ctx context.Context, b *bus.Bus, rc RunConfig, pools []string, httpAddr string, metrics *prometheus.Registry, log *slog.Logger) (*workerconfig.Worker, error) {
	if len(pools) == 0 {
		return nil, nil
	}
	wm, err := telemetry.NewWorkerMetrics(metrics)
	if err != nil {
		return nil, err
	}
	o := workerconfig.Options{PoolTypes: pools, Concurrency: rc.Concurrency, Tools: rc.Tools, Logger: log,
		TracerProvider: rc.TracerProvider, Metrics: wm}
	var f *workerconfig.File
	if rc.WorkerConfig != "" {
		if f, err = workerconfig.Load(rc.WorkerConfig); err != nil {
			return nil, err
		}
	} else {
		f, o.SpecDirs = defaultWorkers(httpAddr, log)
		o.BestEffort = true
	}
	w, err := workerconfig.NewWorker(ctx, b, f, o)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nil, errors.Join(err, w.Stop(sctx))
	}
	return w, nil
}

// parseWorkers reads --workers: the in-process pool types; default all
// with the embedded server, none with an external one.
func parseWorkers(s string, embedded bool) ([]string, error) {
	if s == "" {
		if !embedded {
			return nil, nil
		}
		s = "all"
	}
	switch s {
	case "none":
		return nil, nil
	case "all":
		return []string{"native", "mcp", "sandbox", "http"}, nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if _, ok := bus.ParseType(p); !ok {
			return nil, fmt.Errorf("dispatch: --workers: unknown type %q (want all, none or native,mcp,sandbox,http)", p)
		}
		out = append(out, p)
	}
	return out, nil
}
