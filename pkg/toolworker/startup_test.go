package toolworker_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// status GETs url and returns the status code.
func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// waitLog polls logs until it contains want, failing after d.
func waitLog(t *testing.T, logs *logtest.Buffer, want string, d time.Duration, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(logs.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("the worker ended (%v) before logging %q:\n%s", err, want, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged after %s:\n%s", want, d, logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// A worker started while the cluster has no JetStream leader (one node of
// three up: no quorum) retries, logging each retry, and serves once the
// cluster has a leader. Before, it exited: "bus: stream …: context
// deadline exceeded".
func TestWorkerWaitsForAClusterLeader(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(0)
	echo := tool.Must(tool.New("startup_echo", func(_ context.Context, in struct{ Text string }) (string, error) { return in.Text, nil }))
	var logs logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- toolworker.Run(ctx, toolworker.Options{SigningKey: testKeyFile, NATSURL: c.URL(0), Tools: []*tool.Tool{echo}, Logger: logs.JSONLogger(),
			Ready: ready, Grace: time.Second})
	}()
	waitLog(t, &logs, "retrying worker start-up", 60*time.Second, done)

	c.start(1) // two of three: a leader can be elected
	quorum := time.Now()
	serveRegistryAt(t, c.URL(1)) // a dispatcher, which registers the worker's tools
	select {
	case <-ready:
		t.Logf("serving %s after the second node started", time.Since(quorum).Round(time.Millisecond))
	case err := <-done:
		t.Fatalf("the worker ended: %v\n%s", err, logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the worker never served after the cluster got a leader:\n%s", logs.String())
	}
	cancel()
	require.NoError(t, <-done)
}

// A worker started before its NATS server retries until the server is up.
// While it waits it is alive but not ready: its startup and liveness
// probes pass, so Kubernetes does not restart it.
func TestWorkerWaitsForTheServer(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var logs logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	go func() {
		done <- toolworker.Run(ctx, toolworker.Options{SigningKey: testKeyFile, NATSURL: c.URL(0), Logger: logs.JSONLogger(), Ready: ready, Grace: time.Second,
			HTTPAddr: httpAddr})
	}()
	waitLog(t, &logs, "connect to NATS", 30*time.Second, done)
	require.Equal(t, http.StatusOK, status(t, "http://"+httpAddr+"/healthz"), "alive while waiting")
	require.Equal(t, http.StatusServiceUnavailable, status(t, "http://"+httpAddr+"/readyz"), "not ready while waiting")
	c.start(0)
	c.start(1)
	serveRegistryAt(t, c.URL(1))
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the worker ended: %v\n%s", err, logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the worker never served:\n%s", logs.String())
	}
	require.Equal(t, http.StatusOK, status(t, "http://"+httpAddr+"/readyz"), "ready once serving")
	cancel()
	require.NoError(t, <-done)

	// Stopped while waiting: Run returns, saying what it waited for.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	var logs2 logtest.Buffer
	go func() {
		done2 <- toolworker.Run(ctx2, toolworker.Options{NATSURL: "nats://127.0.0.1:1", Logger: logs2.JSONLogger(), Grace: time.Second})
	}()
	waitLog(t, &logs2, "retrying worker start-up", 30*time.Second, done2)
	cancel2()
	select {
	case err := <-done2:
		require.ErrorContains(t, err, "stopped before the NATS cluster was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
