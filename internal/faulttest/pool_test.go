package faulttest_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Two real worker processes on one pool share a stream of calls: both
// execute some, no call is executed twice, every call has one result.
func TestTwoWorkerProcessesShareAPool(t *testing.T) {
	t.Parallel()
	bin := faulttest.Binaries(t)
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	var procs []*faulttest.Proc
	for i := range 2 {
		procs = append(procs, faulttest.Start(t, fmt.Sprintf("worker-%d", i), filepath.Join(bin, "ledgerworker"),
			"--ledger", ledger, "--nats-url", s.Env.URL, "--signing-key", s.WorkerKeyFile, "--concurrency", "4", "--name", fmt.Sprintf("w%d", i), "--http", ""))
	}
	s.WaitTool(t, "ledger")

	const n = 200
	results := make([]*toolwirev1.CallResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = s.Dispatcher.Call(t.Context(), identity.Default,
				&toolwirev1.CallRequest{Tool: "ledger", ArgumentsJson: fmt.Sprintf(`{"sleep_ms":5,"text":"c%d"}`, i)}, 30*time.Second)
		}()
	}
	wg.Wait()

	ids := map[string]bool{}
	workers := map[string]int{}
	for i := range n {
		require.NoError(t, errs[i])
		r := results[i]
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
		require.True(t, r.Response.Ok, "%v", r.Response.Error)
		require.Equal(t, fmt.Sprintf("c%d", i), r.Response.Content[0].GetText().Text)
		require.False(t, ids[r.CallId], "call id reused")
		ids[r.CallId] = true
		workers[r.Response.Meta.Worker]++
	}
	execs := faulttest.Executions(faulttest.ReadLedger(t, ledger))
	require.Len(t, execs, n)
	for id, k := range execs {
		require.True(t, ids[id], "ledger has a call nobody submitted")
		require.Equal(t, 1, k, "call %s executed %d times", id, k)
	}
	require.Len(t, workers, 2, "both workers execute some calls: %v", workers)
	for w, k := range workers {
		require.Positive(t, k, w)
	}
	info, err := s.Env.Bus.Results.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(n), info.State.Msgs, "one result per call")

	for _, p := range procs {
		require.NoError(t, p.Signal(syscall.SIGTERM))
	}
	for _, p := range procs {
		require.Equal(t, 0, p.Wait(t, 30*time.Second), p.Output())
	}
}
