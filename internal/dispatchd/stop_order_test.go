package dispatchd_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// runWithPolicy runs the dispatcher process with native in-process
// workers and the policy file, and returns its address, the function that
// stops it and the channel of Run's result.
func runWithPolicy(t *testing.T, policy string, grace time.Duration) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	file := writePolicyFile(t, policy)
	workerConfig := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native}]\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "native", Grace: grace,
			WorkerConfig: workerConfig, Tools: builtin.Tools(), PolicyFile: file, Ready: ready, Logger: slog.New(slog.DiscardHandler)})
	}()
	select {
	case addr := <-ready:
		return addr, cancel, done
	case err := <-done:
		t.Fatalf("Run refused to start: %v", err)
	}
	return "", nil, nil
}

// The --policy file's tests see the specs of the in-process tools (echo is
// read-only, so a rule on destructive tools does not ask about it): the
// workers register them before the file is applied.
func TestPolicyFileTestsSeeTheInProcessTools(t *testing.T) {
	t.Parallel()
	_, stop, done := runWithPolicy(t, `tenant:
  default: allow
  rules:
    - id: destructive-asks
      effect: ask
      tools: ["*"]
      when: tool.annotations.destructive
tests:
  - tool: echo
    args: {text: hi}
    expect: allow
`, 25*time.Second)
	stop()
	require.NoError(t, <-done)
}

// A caller still waiting in Call when the process stops (here for an
// approval) is released by the dispatcher's stop, so the HTTP server's
// shutdown does not wait out the grace period for it.
func TestAWaitingCallerDoesNotHoldTheStop(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Minute
	addr, stop, done := runWithPolicy(t, `tenant:
  default: allow
  rules:
    - id: echo-asks
      effect: ask
      tools: [echo]
`, grace)
	c := toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, "http://"+addr)
	called := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`,
			WaitForApproval: true, Wait: durationpb.New(grace)}))
		called <- err
	}()
	require.Eventually(t, func() bool { // the call is parked, its caller waiting
		r, err := c.ListApprovals(context.Background(), connect.NewRequest(&toolwirev1.ListApprovalsRequest{}))
		return err == nil && len(r.Msg.GetApprovals()) == 1
	}, time.Minute, 50*time.Millisecond)
	start := time.Now()
	stop()
	require.NoError(t, <-done)
	<-called
	// Bounded well below the grace period, not by how fast the host is:
	// before, the stop took the whole grace period.
	require.Less(t, time.Since(start), grace/2, "the stop waited for the caller")
}
