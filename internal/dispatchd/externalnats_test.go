package dispatchd_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/logtest"
)

// On an external cluster the dispatcher's connection is watched: its
// disconnects, reconnects, changes of server and the watchdog's moves are
// on /metrics from the start, and the connection is logged under
// component=nats.
func TestExternalNATSConnectionIsCounted(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	logs := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NATSURL: env.URL,
			Workers: "none", NoUI: true, Ready: ready, Logger: logs.JSONLogger()})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("dispatcher stopped: %v", err)
	}
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	for _, m := range []string{"toolwire_nats_disconnects_total 0", "toolwire_nats_reconnects_total 0",
		"toolwire_nats_server_changes_total 0", "toolwire_nats_watchdog_moves_total 0"} {
		require.Contains(t, string(body), m)
	}
	require.Contains(t, logs.String(), `"msg":"NATS connected","component":"nats"`)
	require.NotContains(t, logs.String(), bustest.User+":", "no credentials in the logs")
}
