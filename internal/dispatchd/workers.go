package dispatchd

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

// newWorkers builds the in-process workers (the process starts them), none without
// pools (nil), their metrics registered on metrics: from
// rc.WorkerConfig, or the default configuration (every built-in example;
// an executor that cannot start on this host is reported and its calls
// answered, the others still served).
func newWorkers(ctx context.Context, b *bus.Bus, rc RunConfig, pools []string, httpAddr string, metrics *prometheus.Registry) (*workerconfig.Worker, error) {
	log := rc.Logger
	if len(pools) == 0 {
		return nil, nil
	}
	wm, err := telemetry.NewWorkerMetrics(metrics)
	if err != nil {
		return nil, err
	}
	// In process, the workers write the registry through the checks the
	// dispatchers serve to worker processes (the dispatcher's service
	// starts after them).
	o := workerconfig.Options{PoolTypes: pools, Concurrency: rc.Concurrency, Tools: rc.Tools, Logger: log,
		TracerProvider: rc.TracerProvider, Metrics: wm, Registry: registry.NewRegistrar(b, log, nil, "")}
	var f *workerconfig.File
	if rc.WorkerConfig != "" {
		if f, err = workerconfig.Load(rc.WorkerConfig); err != nil {
			return nil, err
		}
	} else {
		f, o.SpecDirs = defaultWorkers(httpAddr, log)
		o.BestEffort = true
	}
	return workerconfig.NewWorker(ctx, b, f, o)
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
