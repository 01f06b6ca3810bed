package dispatchd_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/dispatchd/dispatchdtest"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/tool"
)

// A second dispatcher on a data directory in use is refused at once,
// naming the one that holds it, before it opens the store.
func TestDataDirIsLocked(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	stop := runIdle(t, data)
	err := dispatchd.Run(t.Context(), dispatchd.RunConfig{DataDir: data, HTTPAddr: "127.0.0.1:0", Workers: "none",
		Logger: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, dispatchd.ErrDataDirInUse)
	require.Regexp(t, `dispatcher pid \d+ \(API http://127\.0\.0\.1:\d+\) holds `, err.Error())
	stop()
	// Released with the first: the directory is usable again.
	runIdle(t, data)()
}

// runIdle runs a dispatcher without workers on data until stop is called.
func runIdle(t *testing.T, data string) (stop func()) {
	t.Helper()
	r := dispatchdtest.Start(t, dispatchd.RunConfig{DataDir: data, Workers: "none", Logger: slog.New(slog.DiscardHandler)})
	return func() { require.NoError(t, r.Stop()) }
}

// The first stop signal waits for calls in flight (the grace period); a
// second one (Hurry) ends the wait at once, handing them back.
func TestHurryEndsTheGracePeriod(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	block := tool.Must(tool.New("block", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", context.Cause(ctx)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry := make(chan struct{})
	ready, done := make(chan string, 1), make(chan error, 1)
	var logs logtest.Buffer
	workerConfig := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native}]\n"), 0o600))
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "native",
			WorkerConfig: workerConfig, Tools: []*tool.Tool{block}, Grace: time.Hour, Hurry: hurry, Ready: ready,
			Logger: logs.JSONLogger()})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dispatcher stopped: %v", err)
	}
	resp, err := http.Post("http://"+addr+"/toolwire.v1.DispatcherService/Submit", "application/json",
		strings.NewReader(`{"tool":"block"}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_ = resp.Body.Close()
	select {
	case <-started:
	case <-time.After(time.Minute): // far below the package's timeout
		t.Fatal("the call never started")
	}
	cancel()
	// Polled, not slept: the stop has begun once it says so.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "interrupt again to hand them back now") },
		time.Minute, 10*time.Millisecond, logs.String())
	close(hurry)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute): // far below the grace period of an hour
		t.Fatal("a second interrupt did not end the grace period")
	}
	require.Contains(t, logs.String(), "handing the calls in flight back")
	require.NotContains(t, logs.String(), `"level":"ERROR"`)
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
