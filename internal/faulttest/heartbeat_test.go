package faulttest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/faulttest"
)

// A call running many AckWaits long is kept alive by heartbeats: it is
// never redelivered while its worker lives.
func TestHeartbeatsKeepLongCallsAlive(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	c.StartWorker(faulttest.WorkerOptions{Name: "w", AckWait: time.Second})
	id, err := c.Submit(t.Context(), ledgerCall("ledger", 6000, "long"))
	require.NoError(t, err)
	resp, err := c.Result(t.Context(), id, 30*time.Second)
	require.NoError(t, err)
	require.True(t, resp.Ok, "%v", resp.Error)
	require.Equal(t, 1, faulttest.Executions(faulttest.ReadLedger(t, c.Ledger))[id])
	require.Equal(t, int32(1), resp.Meta.Attempt)
}
