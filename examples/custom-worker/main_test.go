package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example is a real worker: built as its own binary, started as a
// process against a JetStream server, it registers word_count, answers a
// call made through a dispatcher, and exits 0 on SIGTERM.
func TestCustomWorkerServesItsTool(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startWorker(t, buildExample(t), "--nats-url", s.Env.URL, "--grace", "5s")

	// Poll the registry with a deadline, and stop early if the worker dies.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Registry.Get("word_count"); err == nil {
			break
		}
		select {
		case <-w.done:
			t.Fatalf("worker exited before registering word_count: %v\n%s", w.err, w.out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "word_count never appeared in the registry\n%s", w.out.String())
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

	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("worker did not exit within 20s of SIGTERM\n%s", w.out.String())
	}
	require.NoError(t, w.err, "worker exit after SIGTERM\n%s", w.out.String())
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

type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// startWorker runs bin; a process still running when the test ends is
// killed.
func startWorker(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("worker output:\n%s", p.out.String())
		}
	})
	return p
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
