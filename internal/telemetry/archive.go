package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OverloadArchiveBehind is the overload cause of a call refused because
// the archive is behind (internal/archive): a stream's oldest unarchived
// message is past the stream's window and its margin, so the window
// would drop what no archive holds. Its target is the stream.
const OverloadArchiveBehind = "archive_behind"

var archiveLagDesc = prometheus.NewDesc("toolwire_archive_lag_seconds",
	"Age of each archived stream's oldest message not yet in the archive, as this dispatcher last read it (0 when the archive has caught up).",
	[]string{"stream"}, nil)

// archiveCollector reports the archive's lag per stream from a function
// the dispatcher sets (ObserveArchiveLag); nothing without an archive.
type archiveCollector struct {
	f atomic.Pointer[func() map[string]time.Duration]
}

func (c *archiveCollector) Describe(ch chan<- *prometheus.Desc) { ch <- archiveLagDesc }

func (c *archiveCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f.Load()
	if f == nil {
		return
	}
	for stream, lag := range (*f)() {
		ch <- prometheus.MustNewConstMetric(archiveLagDesc, prometheus.GaugeValue, lag.Seconds(), stream)
	}
}

// ObserveArchiveLag makes f, read at scrape time, the archive's lag per
// stream (toolwire_archive_lag_seconds); the dispatcher sets it when it
// has an archive store.
func (m *DispatcherMetrics) ObserveArchiveLag(f func() map[string]time.Duration) {
	m.archive.f.Store(&f)
}
