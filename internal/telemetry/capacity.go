package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreCapacity is the capacity of one stream or bucket, for the metrics
// (internal/capacity measures it; its bytes and byte limit are
// toolwire_store_bytes and toolwire_store_max_bytes, from StoreLoad).
type StoreCapacity struct {
	// Store is the store's short name (bus.Store.Name, or "account").
	Store string
	// Messages stored, and the limit; MaxMessages -1 = unbounded.
	Messages    uint64
	MaxMessages int64
	// NoMessages says that Messages is not counted (the account):
	// toolwire_store_messages is not reported.
	NoMessages bool
	// Used is the fraction of the nearer limit in use; -1 = unbounded.
	Used float64
	// Measured says a rate was measured; without it GrowthBytes,
	// BytesPerCall and TimeToFull are not reported.
	Measured bool
	// GrowthBytes is the net growth in bytes per second.
	GrowthBytes float64
	// BytesPerCall is what the store takes per call; -1 = unknown.
	BytesPerCall float64
	// TimeToFull at the current rate; 0 = full (for a store whose fill
	// refuses calls, past the dispatchers' high-water); -1 = never at
	// this rate, or unknown.
	TimeToFull time.Duration
}

var (
	storeMsgsDesc = prometheus.NewDesc("toolwire_store_messages",
		"Messages (keys, objects' chunks) stored in a stream or bucket of the layout.", []string{"store"}, nil)
	storeMaxMsgsDesc = prometheus.NewDesc("toolwire_store_max_messages",
		"The message limit of a stream or bucket (absent = unbounded).", []string{"store"}, nil)
	storeUsedDesc = prometheus.NewDesc("toolwire_store_used_ratio",
		"Fraction of a store's nearer limit (bytes or messages) in use, 1 = full (absent = unbounded).", []string{"store"}, nil)
	storeGrowthDesc = prometheus.NewDesc("toolwire_store_growth_bytes_per_second",
		"A store's net growth (written less removed) over the dispatcher's sampling window (absent until two samples).", []string{"store"}, nil)
	storePerCallDesc = prometheus.NewDesc("toolwire_store_bytes_per_call",
		"Bytes a store took per call written to the calls stream over the sampling window (absent when unknown).", []string{"store"}, nil)
	storeFullDesc = prometheus.NewDesc("toolwire_store_seconds_to_full",
		"Seconds until a store is full at its net growth over the sampling window; 0 = full now (calls, idempotency and the account: at the dispatchers' high-water, where new calls are refused); absent = never at this rate (not growing, or it ages out faster than it fills), unbounded or not measured.", []string{"store"}, nil)
)

// capacityCollector reports the stores' capacity at scrape time.
type capacityCollector struct {
	f atomic.Pointer[func() []StoreCapacity]
}

func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{storeMsgsDesc, storeMaxMsgsDesc, storeUsedDesc, storeGrowthDesc, storePerCallDesc, storeFullDesc} {
		ch <- d
	}
}

func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f.Load()
	if f == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, store string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, store)
	}
	for _, s := range (*f)() {
		if !s.NoMessages {
			gauge(storeMsgsDesc, float64(s.Messages), s.Store)
		}
		if s.MaxMessages >= 0 {
			gauge(storeMaxMsgsDesc, float64(s.MaxMessages), s.Store)
		}
		if s.Used >= 0 {
			gauge(storeUsedDesc, s.Used, s.Store)
		}
		if s.TimeToFull == 0 {
			gauge(storeFullDesc, 0, s.Store)
		}
		if !s.Measured {
			continue
		}
		gauge(storeGrowthDesc, s.GrowthBytes, s.Store)
		if s.BytesPerCall >= 0 {
			gauge(storePerCallDesc, s.BytesPerCall, s.Store)
		}
		if s.TimeToFull > 0 {
			gauge(storeFullDesc, s.TimeToFull.Seconds(), s.Store)
		}
	}
}

// ObserveCapacity makes f, read at scrape time, the capacity of the
// stores (the dispatcher sets it when it starts; internal/capacity's
// Sampler.Metrics).
func (m *DispatcherMetrics) ObserveCapacity(f func() []StoreCapacity) { m.capacity.f.Store(&f) }
