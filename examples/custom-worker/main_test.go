package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/faulttest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// The example is a real worker: built as its own binary, started as a
// process against a JetStream server, it registers word_count, answers a
// call made through a dispatcher, and exits 0 on SIGTERM.
func TestCustomWorkerServesItsTool(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := faulttest.Start(t, "custom-worker", buildExample(t), "--nats-url", s.Env.URL, "--signing-key", s.WorkerKeyFile, "--grace", "5s", "--http", "127.0.0.1:0")

	// Poll the registry with a deadline, and stop early if the worker dies.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Registry.Get("word_count"); err == nil {
			break
		}
		select {
		case <-w.Exited():
			t.Fatalf("worker exited before registering word_count\n%s", w.Output())
		default:
		}
		require.True(t, time.Now().Before(deadline), "word_count never appeared in the registry\n%s", w.Output())
		time.Sleep(10 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}

	resp, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
		Tool: "word_count", ArgumentsJson: `{"text":"the quick brown fox\n\njumps over the lazy dog\n"}`,
		Wait: durationpb.New(20 * time.Second),
	}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
	r := resp.Msg.Response
	require.True(t, r.Ok, "%v", r.Error)
	require.JSONEq(t, `{"words":9,"lines":2}`, r.StructuredJson)
	require.Equal(t, "worker", r.Meta.Source)
	require.NotEmpty(t, r.Meta.SpecVersion)

	// Arguments are checked against the schema derived from WordCountIn
	// before anything is queued.
	resp, err = s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
		Tool: "word_count", ArgumentsJson: `{"text":7}`,
	}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, resp.Msg.Response.GetError().GetType())

	require.NoError(t, w.Signal(syscall.SIGTERM))
	require.Equal(t, 0, w.Wait(t, 20*time.Second), "worker exit after SIGTERM\n%s", w.Output())
}

// buildExample builds this package into a temporary directory. A race
// test builds a race binary, which also reuses the test's compiled
// dependencies from the build cache.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "custom-worker")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}
