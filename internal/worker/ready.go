package worker

import (
	"context"
	"errors"

	"github.com/toolwire/toolwire/internal/telemetry"
)

// Ready reports why the worker cannot serve calls now, or nil: it must be
// started (its specs published) and not stopping, connected to NATS, and
// the calls and results streams must exist, and the consumer of every pool
// it serves must exist, unchanged by hand: its declared configuration or
// another replica's whole declaration (guard.go puts a missing or edited
// one back). It backs the worker's /readyz.
func (w *Worker) Ready(ctx context.Context) error {
	w.mu.Lock()
	started, stopped := w.started, w.stopped
	var consumers []declaredPool
	for _, p := range w.cfg.Pools {
		if w.serving[p.Name] {
			consumers = append(consumers, w.declared[p.Name])
		}
	}
	w.mu.Unlock()
	switch {
	case stopped:
		return errors.New("worker stopping")
	case !started:
		return errors.New("worker starting: specs not published yet")
	case !w.bus.NC.IsConnected():
		return errors.New("nats disconnected")
	}
	if err := telemetry.StreamsPresent(ctx, w.bus.Calls, w.bus.Results); err != nil {
		return err
	}
	for _, d := range consumers {
		if err := w.consumerReady(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// PoolConsumers names the durable consumers of the worker's pools
// (created or not yet), for the lag metrics (telemetry.StreamStats).
func (w *Worker) PoolConsumers() []string {
	names := make([]string, len(w.cfg.Pools))
	for i, p := range w.cfg.Pools {
		names[i] = w.bus.Config.PoolConsumer(p.Name)
	}
	return names
}
