package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
)

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	// JetStream reads the streams' info. Required.
	JetStream jetstream.JetStream
	// Bus is the installation's layout (its prefix names the streams).
	Bus bus.Config
	// Every is how often the stores are read. Default 30s.
	Every time.Duration
	// Window is how far back the rate is measured: from the oldest sample
	// kept (at least Window old, at most Window + Every) to the newest.
	// Default 10m; at least Every.
	Window time.Duration
	// HighWater is the dispatchers' StoreHighWater: the share of a byte
	// limit at which a store that refuses calls counts as full (Compute).
	// Default DefaultHighWater (0.9); above 0, at most 1.
	HighWater float64
	// Logger logs failed reads (at Warn, once per change of error).
	// Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with the defaults filled in.
func (c SamplerConfig) WithDefaults() SamplerConfig {
	c.Every = cmp.Or(c.Every, 30*time.Second)
	c.Window = cmp.Or(c.Window, 10*time.Minute)
	c.HighWater = cmp.Or(c.HighWater, DefaultHighWater)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c (after WithDefaults) that is not
// valid.
func (c SamplerConfig) Validate() error {
	switch {
	case c.JetStream == nil:
		return errors.New("capacity: SamplerConfig.JetStream is required")
	case c.Every < 0:
		return fmt.Errorf("capacity: SamplerConfig.Every %s: must not be negative", c.Every)
	case c.Window < c.Every:
		return fmt.Errorf("capacity: SamplerConfig.Window %s: must be at least Every (%s)", c.Window, c.Every)
	case c.HighWater <= 0 || c.HighWater > 1:
		return fmt.Errorf("capacity: SamplerConfig.HighWater %g: must be above 0 and at most 1", c.HighWater)
	}
	return c.Bus.WithDefaults().Validate()
}

// Sampler reads the stores every Every and keeps the samples of the last
// Window, so that Status gives each store's growth at the current rate.
// It is a startstop.Service: Start starts the loop, which takes the first
// sample at once (a failure is logged, not returned: the stores may come
// later).
type Sampler struct {
	cfg  SamplerConfig
	loop *startstop.Loop

	mu      sync.Mutex
	samples []Sample // oldest first
	lastErr string
}

// NewSampler returns a Sampler with cfg.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{cfg: cfg}
	s.loop = startstop.NewLoop(s.run)
	return s, nil
}

// run samples at once, then every Every, until ctx ends.
func (s *Sampler) run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start starts sampling: at once, then every Every.
func (s *Sampler) Start(ctx context.Context) error { return s.loop.Start(ctx) }

// Stop ends the sampling and waits for a read in progress.
func (s *Sampler) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

// sample reads the stores once and keeps the reading.
func (s *Sampler) sample(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, min(s.cfg.Every, 10*time.Second)+time.Second)
	defer cancel()
	got, err := Read(rctx, s.cfg.JetStream, s.cfg.Bus)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && err.Error() != s.lastErr { // not when stopping
			s.cfg.Logger.WarnContext(ctx, "capacity: reading the stores failed", "error", err)
		}
		s.lastErr = err.Error()
		return
	}
	s.lastErr = ""
	s.samples = append(s.samples, got)
	// Keep the newest sample at least Window old, and everything after.
	cut := got.At.Add(-s.cfg.Window)
	for len(s.samples) > 2 && !s.samples[1].At.After(cut) {
		s.samples = s.samples[1:]
	}
}

// Status returns every store's status at the last sample, with the rate
// measured since the oldest sample kept; nil before the first sample.
func (s *Sampler) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return nil
	}
	return Compute(s.samples[0], s.samples[len(s.samples)-1], s.cfg.HighWater)
}

// Metrics returns the status for the metrics, read at scrape time
// (telemetry.DispatcherMetrics.ObserveCapacity).
func (s *Sampler) Metrics() []telemetry.StoreCapacity {
	status := s.Status()
	out := make([]telemetry.StoreCapacity, 0, len(status))
	for _, st := range status {
		out = append(out, st.Metric())
	}
	return out
}

// Metric is st as the metrics report it.
func (st Status) Metric() telemetry.StoreCapacity {
	return telemetry.StoreCapacity{Store: st.Name, Messages: st.Messages, NoMessages: st.IsAccount(), MaxMessages: st.MaxMessages,
		Used: st.Used, Measured: st.Measured, GrowthBytes: st.GrowthBytes, BytesPerCall: st.BytesPerCall, TimeToFull: st.TimeToFull}
}
