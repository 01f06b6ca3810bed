package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolLoad is a dispatcher's view of one pool's backlog, for the metrics.
type PoolLoad struct {
	// Pool is the pool's name.
	Pool string
	// Backlog is the pool's calls queued or running as the dispatcher
	// sees them: the consumer's NumPending + NumAckPending at the last
	// read, plus what this replica admitted since.
	Backlog int64
	// Bound is the backlog past which admission refuses; -1 = none.
	Bound int64
	// DrainRate is the calls per second the pool finished over the last
	// 2s (its capacity while it has a backlog); 0 = not measured yet.
	DrainRate float64
	// ExpectedWait is how long a call admitted now would wait to start.
	ExpectedWait time.Duration
}

// StoreLoad is the use of one stream or bucket, for the metrics.
type StoreLoad struct {
	// Store is the store's short name (bus.Store.Name).
	Store string
	// Bytes stored, and the limit; MaxBytes -1 = unbounded.
	Bytes, MaxBytes int64
}

var (
	poolBacklogDesc = prometheus.NewDesc("toolwire_dispatcher_pool_backlog",
		"A pool's calls queued or running as this dispatcher sees them (the pool consumer's NumPending + NumAckPending, read every --load-refresh, plus what this replica admitted since).", []string{"pool"}, nil)
	poolBoundDesc = prometheus.NewDesc("toolwire_dispatcher_pool_backlog_bound",
		"The backlog past which this dispatcher refuses a pool's calls with OVERLOADED (absent = no bound).", []string{"pool"}, nil)
	poolRateDesc = prometheus.NewDesc("toolwire_dispatcher_pool_drain_rate",
		"Calls per second a pool finished over the last 2s, as this dispatcher measured it (its capacity while it has a backlog; when none finished, its busiest rate, halving every 10s).", []string{"pool"}, nil)
	poolWaitDesc = prometheus.NewDesc("toolwire_dispatcher_pool_expected_wait_seconds",
		"How long a call admitted now would wait to start: the pool's queued calls over its drain rate.", []string{"pool"}, nil)
	storeBytesDesc = prometheus.NewDesc("toolwire_store_bytes",
		"Bytes stored in a stream or bucket of the layout.", []string{"store"}, nil)
	storeMaxDesc = prometheus.NewDesc("toolwire_store_max_bytes",
		"The byte limit of a stream or bucket of the layout (absent = unbounded).", []string{"store"}, nil)
)

// loadCollector reports the dispatcher's load view at scrape time.
type loadCollector struct {
	f atomic.Pointer[func() ([]PoolLoad, []StoreLoad)]
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolBacklogDesc, poolBoundDesc, poolRateDesc, poolWaitDesc, storeBytesDesc, storeMaxDesc} {
		ch <- d
	}
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f.Load()
	if f == nil {
		return
	}
	pools, stores := (*f)()
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(poolBacklogDesc, prometheus.GaugeValue, float64(p.Backlog), p.Pool)
		if p.Bound >= 0 {
			ch <- prometheus.MustNewConstMetric(poolBoundDesc, prometheus.GaugeValue, float64(p.Bound), p.Pool)
		}
		ch <- prometheus.MustNewConstMetric(poolRateDesc, prometheus.GaugeValue, p.DrainRate, p.Pool)
		ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.GaugeValue, p.ExpectedWait.Seconds(), p.Pool)
	}
	for _, s := range stores {
		ch <- prometheus.MustNewConstMetric(storeBytesDesc, prometheus.GaugeValue, float64(s.Bytes), s.Store)
		if s.MaxBytes >= 0 {
			ch <- prometheus.MustNewConstMetric(storeMaxDesc, prometheus.GaugeValue, float64(s.MaxBytes), s.Store)
		}
	}
}

// ObserveLoad makes f, read at scrape time, the dispatcher's view of its
// pools' backlogs and its stores' use (the dispatcher sets it when it
// starts).
func (m *DispatcherMetrics) ObserveLoad(f func() ([]PoolLoad, []StoreLoad)) { m.load.f.Store(&f) }

// Overload causes: what an OVERLOADED refusal at admission was about.
const (
	OverloadBacklog      = "backlog"       // the pool's backlog is at its bound
	OverloadExpectedWait = "expected_wait" // the pool would start the call after its schedule-to-start
	OverloadStore        = "store"         // a store the call writes is nearly full
	OverloadPaused       = "paused"        // the pool is paused by an administrator
)

// Overloaded counts an OVERLOADED refusal at admission by its cause and
// target (the pool, or the store).
func (m *DispatcherMetrics) Overloaded(cause, target string) {
	m.overloads.WithLabelValues(cause, target).Inc()
}
