package telemetry_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/telemetry"
)

// counts is a connection's counts, as a bus.ConnMonitor reports them.
type counts struct{ disconnects, reconnects, changes, moves uint64 }

func (c counts) Disconnects() uint64   { return c.disconnects }
func (c counts) Reconnects() uint64    { return c.reconnects }
func (c counts) ServerChanges() uint64 { return c.changes }
func (c counts) Moves() uint64         { return c.moves }

func TestConnCollectorExportsTheConnectionsCounts(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(telemetry.NewConnCollector(counts{4, 3, 2, 1})))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		require.Len(t, f.GetMetric(), 1)
		got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
	}
	require.Equal(t, map[string]float64{
		"toolwire_nats_disconnects_total":    4,
		"toolwire_nats_reconnects_total":     3,
		"toolwire_nats_server_changes_total": 2,
		"toolwire_nats_watchdog_moves_total": 1,
	}, got)
}
