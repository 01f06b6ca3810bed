package dispatchd_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
	"google.golang.org/protobuf/types/known/durationpb"
)

const echoDenied = `tenant:
  default: allow
  rules:
    - id: no-echo
      effect: deny
      tools: [echo]
      reason: echo is switched off here
tests:
  - tool: echo
    expect: deny
  - tool: remember
    expect: allow
`

func writePolicyFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// --policy FILE applies FILE as the installation document at start: every
// tenant is under it, and GetPolicy shows it as the installation's.
func TestPolicyFlagAppliesTheInstallationDocument(t *testing.T) {
	t.Parallel()
	file := writePolicyFile(t, echoDenied)
	workerConfig := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native}]\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "native",
			WorkerConfig: workerConfig, Tools: builtin.Tools(), PolicyFile: file, Ready: ready, Logger: slog.New(slog.DiscardHandler)})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dispatcher stopped: %v", err)
	}
	c := toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, "http://"+addr)
	resp, err := c.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, resp.Msg.Response.GetError().GetType())
	require.Contains(t, resp.Msg.Response.GetError().GetMessage(), "echo is switched off here")

	got, err := c.GetPolicy(t.Context(), connect.NewRequest(&toolwirev1.GetPolicyRequest{}))
	require.NoError(t, err)
	require.Equal(t, "*", got.Msg.Version.GetTenant())
	require.Equal(t, "--policy", got.Msg.Version.GetAppliedBy())
	require.Equal(t, echoDenied, got.Msg.Document)
	cancel()
	require.NoError(t, <-done)
}

// A --policy file that does not parse, whose condition does not compile or
// whose tests fail stops the dispatcher from starting, naming the lines.
func TestPolicyFlagRefusesABadDocument(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		doc, want string
	}{
		{"tenant:\n  default: maybe\n", "line 2: tenant.default"},
		{"tenant:\n  rules:\n    - {id: x, effect: deny, tools: [\"*\"], when: \"args.a ==\"}\n", "line 3: tenant.rules[0].when"},
	} {
		var stderr bytes.Buffer
		code := dispatchd.Main([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--workers", "none", "--policy", writePolicyFile(t, tt.doc)}, &stderr, nil)
		require.Equal(t, 1, code, stderr.String())
		require.Contains(t, stderr.String(), "dispatcher: --policy ")
		require.Contains(t, stderr.String(), tt.want)
	}
	var stderr bytes.Buffer
	require.Equal(t, 1, dispatchd.Main([]string{"--data", t.TempDir(), "--workers", "none", "--policy", filepath.Join(t.TempDir(), "none.yaml")}, &stderr, nil))
	require.Contains(t, stderr.String(), "no such file")

	// Tests run against the registry, so they fail once the store is up.
	failing := writePolicyFile(t, echoDenied+"  - tool: echo\n    expect: allow\n")
	err := dispatchd.Run(t.Context(), dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "none",
		PolicyFile: failing, Logger: slog.New(slog.DiscardHandler)})
	var perr *dispatchd.PolicyError
	require.ErrorAs(t, err, &perr)
	require.ErrorIs(t, err, policy.ErrTestsFailed)
	require.Contains(t, err.Error(), "line 13: tests[2]")
}

// starterPolicy is the production starter policy of docs/policy.md.
const starterPolicy = "../../docs/examples/policy-starter.yaml"

// The starter policy of the docs parses and its tests pass, on their own
// and against the registry of a dispatcher started with it; under it the
// built-in tools run.
func TestStarterPolicyOfTheDocs(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(starterPolicy)
	require.NoError(t, err)
	p, err := policy.Parse(src)
	require.NoError(t, err)
	require.NoError(t, p.RunTests(nil))
	require.GreaterOrEqual(t, p.Tests(), 8)

	workerConfig := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native}]\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "native",
			WorkerConfig: workerConfig, Tools: builtin.Tools(), PolicyFile: starterPolicy, Ready: ready,
			Logger: slog.New(slog.DiscardHandler)})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dispatcher refused the starter policy: %v", err)
	}
	c := toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, "http://"+addr)
	for tool, args := range map[string]string{"echo": `{"text":"hi"}`, "remember": `{"key":"k","value":"v"}`} {
		resp, err := c.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args}))
		require.NoError(t, err)
		require.True(t, resp.Msg.Response.GetOk(), "%s: %v", tool, resp.Msg.Response.GetError())
	}
	x, err := c.Explain(t.Context(), connect.NewRequest(&toolwirev1.ExplainRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1s"}`, Agent: "support-bot"}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.PolicyOutcome_POLICY_OUTCOME_DENY, x.Msg.Decision.GetOutcome())
	require.Equal(t, "agent", x.Msg.Decision.GetDefaultLayer())
	cancel()
	require.NoError(t, <-done)
}

// The limits example of the docs parses, and its limits refuse as the
// docs say: a third concurrent sleep of one agent is refused RATE_LIMIT.
func TestLimitsExampleOfTheDocs(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/examples/policy-limits.yaml")
	require.NoError(t, err)
	p, err := policy.Parse(src)
	require.NoError(t, err)
	require.Len(t, p.Limits(), 4)
	require.Len(t, p.LimitsFor("sleep"), 4)
	require.Len(t, p.LimitsFor("echo"), 2)
	cost := p.Limits()[3]
	require.Equal(t, "tenant-cost", cost.ID)
	args, err := policy.ParseArgs([]byte(`{"duration":"2m"}`))
	require.NoError(t, err)
	n, err := cost.CostOf(&policy.Input{Tool: &toolwirev1.ToolSpec{Name: "sleep"}, Args: args})
	require.NoError(t, err)
	require.EqualValues(t, 100, n)

	workerConfig := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(workerConfig, []byte("pools: [{type: native, concurrency: 8}]\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "native",
			WorkerConfig: workerConfig, Tools: builtin.Tools(), PolicyFile: "../../docs/examples/policy-limits.yaml", Ready: ready,
			Logger: slog.New(slog.DiscardHandler)})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dispatcher refused the limits example: %v", err)
	}
	c := toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, "http://"+addr)
	var ids []string
	for range 2 {
		resp, err := c.Submit(t.Context(), connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "sleep", ArgumentsJson: `{"duration":"3s"}`}))
		require.NoError(t, err)
		require.Nil(t, resp.Msg.GetResponse().GetError(), "two sleeps may run")
		ids = append(ids, resp.Msg.CallId)
	}
	resp, err := c.Submit(t.Context(), connect.NewRequest(&toolwirev1.SubmitRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, resp.Msg.GetResponse().GetError().GetType(), "the third is refused")
	for _, id := range ids {
		r, err := c.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: id, Wait: durationpb.New(30 * time.Second)}))
		require.NoError(t, err)
		require.True(t, r.Msg.GetResponse().GetOk())
	}
	cancel()
	require.NoError(t, <-done)
}
