package dispatchd_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/testport"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// dispatcherProc is a dispatcher process (this test binary as
// dispatchd.Main) on an external NATS server.
type dispatcherProc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	url  string
}

// startDispatcherProc starts a dispatcher process named name on natsURL,
// serving on port (with extra flags), and waits until it is ready.
func startDispatcherProc(t *testing.T, name, natsURL string, port int, extra ...string) *dispatcherProc {
	t.Helper()
	// A loaded test machine slows every pool: the default 2s bound on queue
	// wait would refuse calls these tests are not about (its own tests are
	// in internal/dispatch, overload_test.go); a later flag in extra wins.
	args := append([]string{"--nats-url", natsURL, "--http", fmt.Sprintf("127.0.0.1:%d", port), "--name", name, "--log-level", "warn",
		"--max-queue-wait", "1m"}, extra...)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgs+"="+strings.Join(args, "\x1f"))
	p := &dispatcherProc{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{}), url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of dispatcher %s:\n%s", name, p.out.String())
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("dispatcher %s exited:\n%s", name, p.out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "dispatcher %s never became ready", name)
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// kill sends SIGKILL (kill -9) and waits for the exit.
func (p *dispatcherProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// A parked call survives its dispatcher's kill -9: the process is killed
// right after parking it and started again, the call is still awaiting
// approval there, another replica approves it, and it runs exactly once
// (the ledger); the restarted process answers its result.
func TestParkedCallSurvivesDispatcherKill(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	runs := map[string]int{}
	wipe := tool.Must(tool.New("wipe", func(ctx context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		mu.Lock()
		runs[info.CallID]++
		mu.Unlock()
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))
	startWorker(ctx, t, env, workerconfig.Options{Tools: []*tool.Tool{wipe}})

	port := testport.Free(t)
	a := startDispatcherProc(t, "replica-a", env.URL, port)
	client := toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, a.url)
	var sub *connect.Response[toolwirev1.SubmitResponse]
	var err error
	require.Eventually(t, func() bool { // the worker's tool reaches the process's registry
		sub, err = client.Submit(ctx, connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/srv"}`}))
		return err == nil && sub.Msg.State == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL
	}, time.Minute, 50*time.Millisecond, "%v %v", err, sub)
	id := sub.Msg.CallId

	a.kill()
	a = startDispatcherProc(t, "replica-a", env.URL, port)
	client = toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, a.url)
	g, err := client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: id}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, g.Msg.State, "still parked after kill -9 and restart")

	// Another replica (in this process) approves it.
	reg := registry.NewStore(env.Bus.Registry, slog.New(slog.DiscardHandler))
	require.NoError(t, reg.Start(ctx))
	t.Cleanup(func() { _ = reg.Stop(context.Background()) })
	b, err := dispatch.New(env.Bus, reg, dispatch.Config{Name: "replica-b", Logger: slog.New(slog.DiscardHandler), MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		_ = b.Stop(sctx)
	})
	_, _, err = b.Approvals().Approve(ctx, identity.Identity{Tenant: "default", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}},
		&toolwirev1.ApproveRequest{Id: id})
	require.NoError(t, err)

	r, err := client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: id, Wait: durationpb.New(time.Minute)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.Msg.State)
	require.True(t, r.Msg.Response.Ok, "%v", r.Msg.Response.Error)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{id: 1}, runs)
}

// A token key file that group or others can read stops the start, and its
// error shows no key.
func TestApprovalTokenKeyFileIsChecked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0"
	require.NoError(t, os.WriteFile(path, []byte("k1:"+secret+"\n"), 0o600))
	require.NoError(t, os.Chmod(path, 0o644))
	err := dispatchd.Run(t.Context(), dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "none",
		ApprovalTokenKeys: path, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, approvals.ErrKeyFile)
	require.NotContains(t, err.Error(), secret)
}

// startWorker starts an in-process worker on env with opts (its logs
// discarded), stopped when the test ends.
func startWorker(ctx context.Context, t *testing.T, env *bustest.Env, opts workerconfig.Options) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	b := env.Open(t, "worker")
	opts.Registry = registry.NewRegistrar(b, opts.Logger, nil, "") // it starts before the dispatchers
	w, err := workerconfig.NewWorker(ctx, b, nil, opts)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = w.Stop(sctx)
	})
}
