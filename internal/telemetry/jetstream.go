package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// StreamStats reports, at scrape time, the lag of pool consumers and the
// depth of the dead-letter stream, read from JetStream (consumer and
// stream info) and cached for TTL so that frequent or concurrent scrapes
// cost at most one round of requests per TTL. A failed read is left out of
// the scrape (and counted in toolwire_jetstream_scrape_errors_total)
// rather than reported as zero.
type StreamStats struct {
	// Calls is the calls stream whose consumers are reported.
	Calls jetstream.Stream
	// Consumers names the consumers reported; nil = every consumer of
	// Calls (the dispatcher's view), else the worker's own pools. A
	// consumer that does not exist yet is skipped.
	Consumers func() []string
	// PoolPrefix is stripped from a consumer's name to give the pool
	// label (the bus' PoolConsumer prefix, "<prefix>_pool_").
	PoolPrefix string
	// DLQ, when set, is reported as toolwire_dlq_messages.
	DLQ jetstream.Stream
	// TTL of the cache. Default 2s.
	TTL time.Duration
	// Timeout bounds one round of reads. Default 2s.
	Timeout time.Duration

	mu       sync.Mutex
	at       time.Time
	cached   []prometheus.Metric
	failures float64
}

var (
	lagDesc        = prometheus.NewDesc("toolwire_pool_lag_messages", "Calls of a pool not yet acknowledged: pending delivery plus delivered and awaiting ack (NumPending + NumAckPending); the scaling signal.", []string{"pool"}, nil)
	pendingDesc    = prometheus.NewDesc("toolwire_pool_pending_messages", "Calls of a pool not yet delivered (NumPending).", []string{"pool"}, nil)
	ackPendingDesc = prometheus.NewDesc("toolwire_pool_ack_pending_messages", "Calls of a pool delivered and awaiting ack (NumAckPending).", []string{"pool"}, nil)
	redelivDesc    = prometheus.NewDesc("toolwire_pool_redelivered_messages", "Calls of a pool delivered more than once and not yet acknowledged (NumRedelivered).", []string{"pool"}, nil)
	dlqDesc        = prometheus.NewDesc("toolwire_dlq_messages", "Dead letters stored in the DLQ stream.", nil, nil)
	scrapeErrDesc  = prometheus.NewDesc("toolwire_jetstream_scrape_errors_total", "Failed JetStream reads while scraping.", nil, nil)
)

// Describe sends the descriptors of the metrics.
func (s *StreamStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, pendingDesc, ackPendingDesc, redelivDesc, dlqDesc, scrapeErrDesc} {
		ch <- d
	}
}

// Collect sends the cached metrics, reading them again when older than TTL.
func (s *StreamStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl := s.TTL
	if ttl <= 0 {
		ttl = 2 * time.Second
	}
	if s.cached == nil || time.Since(s.at) >= ttl {
		s.cached = s.read()
		s.at = time.Now()
	}
	for _, m := range s.cached {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.CounterValue, s.failures)
}

func (s *StreamStats) read() []prometheus.Metric {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := []prometheus.Metric{}
	add := func(ci *jetstream.ConsumerInfo) {
		pool := strings.TrimPrefix(ci.Name, s.PoolPrefix)
		out = append(out,
			prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(ci.NumPending)+float64(ci.NumAckPending), pool),
			prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(ci.NumPending), pool),
			prometheus.MustNewConstMetric(ackPendingDesc, prometheus.GaugeValue, float64(ci.NumAckPending), pool),
			prometheus.MustNewConstMetric(redelivDesc, prometheus.GaugeValue, float64(ci.NumRedelivered), pool))
	}
	if s.Calls != nil {
		if s.Consumers == nil {
			l := s.Calls.ListConsumers(ctx)
			for ci := range l.Info() {
				add(ci)
			}
			if l.Err() != nil {
				s.failures++
			}
		} else {
			for _, name := range s.Consumers() {
				c, err := s.Calls.Consumer(ctx, name)
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					continue
				}
				if err != nil {
					s.failures++
					continue
				}
				add(c.CachedInfo())
			}
		}
	}
	if s.DLQ != nil {
		if info, err := s.DLQ.Info(ctx); err == nil {
			out = append(out, prometheus.MustNewConstMetric(dlqDesc, prometheus.GaugeValue, float64(info.State.Msgs)))
		} else {
			s.failures++
		}
	}
	return out
}

// StreamsPresent reports the first stream whose info cannot be read (the
// readiness check of the JetStream layout).
func StreamsPresent(ctx context.Context, streams ...jetstream.Stream) error {
	for _, st := range streams {
		if st == nil {
			continue
		}
		if _, err := st.Info(ctx); err != nil {
			return fmt.Errorf("stream %s: %w", st.CachedInfo().Config.Name, err)
		}
	}
	return nil
}
