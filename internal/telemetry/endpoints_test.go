package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// run runs f until the test ends, returning what it sends on its ready
// channel.
func run(t *testing.T, f func(ctx context.Context, ready chan<- string) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- f(ctx, ready) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case addr := <-ready:
		return addr
	case err := <-done:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("not serving after 30s")
	}
	return ""
}

// The binaries' own endpoints: the worker process (toolworker.Run with
// --http) and the dispatcher process (dispatchd.Run, on its API address)
// serve /healthz, /readyz and /metrics, and the metrics count the calls.
func TestBinariesServeHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	quiet := slog.New(slog.DiscardHandler)
	keys := t.TempDir() // the worker's signing key, which the dispatcher trusts
	workerKey := filepath.Join(keys, "native.nk")
	_, err := signing.KeyFile(workerKey)
	require.NoError(t, err)
	// The dispatcher first: a worker serves once a dispatcher has
	// registered its tools.
	apiAddr := run(t, func(ctx context.Context, ready chan<- string) error {
		return dispatchd.Run(ctx, dispatchd.RunConfig{NATSURL: env.URL, Workers: "none", HTTPAddr: "127.0.0.1:0", Grace: 5 * time.Second,
			Ready: ready, Logger: quiet, WorkerKeys: keys})
	})
	workerAddr := run(t, func(ctx context.Context, ready chan<- string) error {
		return toolworker.Run(ctx, toolworker.Options{NATSURL: env.URL, Tools: []*tool.Tool{echoTool()}, HTTPAddr: "127.0.0.1:0",
			Grace: 5 * time.Second, Ready: ready, Logger: quiet, SigningKey: workerKey})
	})
	c, err := client.New("http://" + apiAddr)
	require.NoError(t, err)
	eventually(t, func() error { // the dispatcher's registry watcher sees the worker's tool
		_, err := c.GetTool(t.Context(), "say")
		return err
	})

	const n = 5
	for i := range n {
		res, err := c.Call(t.Context(), "say", map[string]string{"text": strconv.Itoa(i)})
		require.NoError(t, err)
		require.NoError(t, res.Err())
	}
	eventually(t, func() error {
		return expect(scrape(t, "http://"+workerAddr+"/metrics"), map[string]float64{
			`toolwire_calls_total{executor="native",outcome="ok",tool="say"}`:         n,
			`toolwire_execution_duration_seconds_count{executor="native",tool="say"}`: n,
			`toolwire_call_duration_seconds_count{executor="native",tool="say"}`:      n,
			`toolwire_pool_lag_messages{pool="native"}`:                               0,
		})
	})
	require.NoError(t, expect(scrape(t, "http://"+apiAddr+"/metrics"), map[string]float64{
		`toolwire_dispatcher_calls_total{outcome="accepted"}`:  n,
		`toolwire_dispatcher_admission_duration_seconds_count`: n,
		`toolwire_pool_lag_messages{pool="native"}`:            0,
		`toolwire_dlq_messages`:                                0,
	}))
	for _, u := range []string{"http://" + workerAddr, "http://" + apiAddr} {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(u + path)
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, u+path)
		}
	}
}
