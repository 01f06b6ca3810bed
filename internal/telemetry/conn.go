package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ConnCounts are what a NATS connection counted: bus.ConnMonitor has
// them.
type ConnCounts interface {
	Disconnects() uint64
	Reconnects() uint64
	ServerChanges() uint64
	Moves() uint64
}

// connCollector exports a connection's counts at scrape time.
type connCollector struct{ c ConnCounts }

var (
	connDisconnects = prometheus.NewDesc("toolwire_nats_disconnects_total",
		"Times the process's NATS connection lost its server (closed socket, unanswered PINGs, a stuck write, a watchdog move).", nil, nil)
	connReconnects = prometheus.NewDesc("toolwire_nats_reconnects_total",
		"Times the process's NATS connection was established again.", nil, nil)
	connServerChanges = prometheus.NewDesc("toolwire_nats_server_changes_total",
		"Reconnects of the process's NATS connection that landed on another server than the one left.", nil, nil)
	connMoves = prometheus.NewDesc("toolwire_nats_watchdog_moves_total",
		"Times the connection watchdog moved the NATS connection off a silent server or one whose JetStream failed.", nil, nil)
)

// NewConnCollector exports c's counts as the process's NATS connection
// metrics: toolwire_nats_disconnects_total, toolwire_nats_reconnects_total,
// toolwire_nats_server_changes_total and
// toolwire_nats_watchdog_moves_total. Register one per process.
func NewConnCollector(c ConnCounts) prometheus.Collector { return connCollector{c} }

func (connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connDisconnects
	ch <- connReconnects
	ch <- connServerChanges
	ch <- connMoves
}

func (k connCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{connDisconnects, k.c.Disconnects()}, {connReconnects, k.c.Reconnects()},
		{connServerChanges, k.c.ServerChanges()}, {connMoves, k.c.Moves()}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
