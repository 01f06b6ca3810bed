package toolctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// authStack is a dispatcher process (dispatchd.Run) whose embedded server
// listens on loopback with the managed credentials, and worker processes
// (toolworker.Run) that connect over TCP as the worker role.
type authStack struct {
	data    string
	natsURL string
	client  *client.Client
	logs    *logtest.Buffer
}

var clientURLRe = regexp.MustCompile(`"client_url":"(nats://[^"]+)"`)

// runUntilCleanup runs fn in a goroutine until the test ends; ready
// reports fn serving, done its end.
func runUntilCleanup(t *testing.T, fn func(ctx context.Context) error, ready <-chan string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case addr := <-ready:
		return addr
	case err := <-done:
		t.Fatalf("stopped before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not serving after 60s")
	}
	return ""
}

func startAuthStack(t *testing.T, tools ...*tool.Tool) *authStack {
	t.Helper()
	s := &authStack{data: t.TempDir(), logs: &logtest.Buffer{}}
	ready := make(chan string, 1)
	api := runUntilCleanup(t, func(ctx context.Context) error {
		return dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: s.data, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0",
			Workers: "none", Grace: 5 * time.Second, Ready: ready, Logger: s.logs.JSONLogger()})
	}, ready)
	m := clientURLRe.FindStringSubmatch(s.logs.String())
	require.NotNil(t, m, "the dispatcher logs its NATS client URL:\n%s", s.logs.String())
	s.natsURL = m[1]
	c, err := client.New("http://" + api)
	require.NoError(t, err)
	s.client = c

	// A worker process on the same machine: no credentials given, it
	// finds the dispatcher's worker credentials under the data directory.
	var wlogs logtest.Buffer
	wready := make(chan string, 1)
	runUntilCleanup(t, func(ctx context.Context) error {
		return toolworker.Run(ctx, toolworker.Options{NATSURL: s.natsURL, DataDir: s.data, Tools: tools, Concurrency: 4,
			Grace: 5 * time.Second, Ready: wready, Logger: wlogs.JSONLogger()})
	}, wready)
	require.Contains(t, wlogs.String(), bus.CredentialsFile(bus.CredentialsDir(s.data), bus.RoleWorker))
	// And a shadow worker of the same tools, for replays.
	sready := make(chan string, 1)
	runUntilCleanup(t, func(ctx context.Context) error {
		return toolworker.Run(ctx, toolworker.Options{NATSURL: s.natsURL, DataDir: s.data, Tools: tools, Pool: "shadow", Shadow: true,
			Concurrency: 4, Grace: 5 * time.Second, Ready: sready, Logger: wlogs.JSONLogger()})
	}, sready)
	return s
}

// toolctl runs toolctl with the operator's environment on the
// dispatcher's machine: its NATS URL and data directory, no credentials.
func (s *authStack) toolctl(t *testing.T, args ...string) outcome {
	t.Helper()
	return run(t, map[string]string{"TOOLWIRE_NATS_URL": s.natsURL, "TOOLWIRE_DATA": s.data}, "", args...)
}

// violations are the permission violations the server logged.
func (s *authStack) violations() []string {
	var out []string
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(line, "Violation") {
			out = append(out, line)
		}
	}
	return out
}

var authEcho = tool.Must(tool.New("auth_echo", func(_ context.Context, in struct {
	Text string `json:"text"`
}) (string, error) {
	return in.Text, nil
}, tool.Idempotent()))

// authBig returns more than a result holds inline: the worker stores the
// full output in the blob store.
var authBig = tool.Must(tool.New("auth_big", func(context.Context, struct{}) (string, error) {
	return strings.Repeat("x", 1<<20), nil
}, tool.Idempotent()))

// authWait runs until it is cancelled.
var authWait = tool.Must(tool.New("auth_wait", func(ctx context.Context, _ struct{}) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}, tool.Idempotent()))

// authLater fails its first attempt with a retry-after beyond what a
// worker waits in process: the retry is parked as a message schedule,
// put back on CALLS by the dispatcher, and redelivered.
var authLater = func() *tool.Tool {
	var attempts atomic.Int32
	return tool.Must(tool.New("auth_later", func(context.Context, struct{}) (string, error) {
		if attempts.Add(1) == 1 {
			e := tool.Transient(errors.New("come back later"))
			e.RetryAfter = 11 * time.Second
			return "", e
		}
		return "later", nil
	}, tool.Idempotent(), tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 2})))
}()

// With --nats-listen, the listener wants credentials; a worker process
// and toolctl on the same machine find theirs under the data directory
// without flags, and everything they do stays within their roles'
// permissions (the server logs no violation).
func TestManagedCredentialsServeWorkersAndOperators(t *testing.T) {
	t.Parallel()
	s := startAuthStack(t, authEcho, flakyTool, authBig, authWait, authLater)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Started first: its retry takes 11s.
	later, err := s.client.Submit(ctx, "auth_later", []byte(`{}`))
	require.NoError(t, err)
	require.Nil(t, later.Result)

	_, err = nats.Connect(s.natsURL, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "no credentials, no connection")
	dir := bus.CredentialsDir(s.data)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, role := range bus.Roles() {
		fi, err := os.Stat(bus.CredentialsFile(dir, role))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), role)
		seed, err := os.ReadFile(bus.CredentialsFile(dir, role))
		require.NoError(t, err)
		require.NotContains(t, s.logs.String(), strings.TrimSpace(string(seed)), "a seed was logged")
	}
	require.Contains(t, s.logs.String(), filepath.Join(dir, "operator.nk"), "the dispatcher says where the credentials are")

	// A call served end to end by the worker process.
	res, err := s.client.Call(ctx, "auth_echo", []byte(`{"text":"through the authenticated listener"}`))
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Err())
	require.Equal(t, "through the authenticated listener", res.Text())

	// Output over the inline limit: stored in the blob store.
	res, err = s.client.Call(ctx, "auth_big", []byte(`{}`))
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Err())
	require.NotNil(t, res.Response.GetMeta().GetFullOutput(), "the full output is in the blob store")

	// A running call cancelled: the worker hears the tombstone.
	waiting, err := s.client.Submit(ctx, "auth_wait", []byte(`{}`))
	require.NoError(t, err)
	for deadline := time.Now().Add(20 * time.Second); ; {
		outcome, err := s.client.Cancel(ctx, waiting.CallID, "test")
		require.NoError(t, err)
		require.NotEqual(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, outcome)
		got, err := s.client.GetResult(ctx, waiting.CallID, time.Second)
		if err == nil {
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, got.Response.GetError().GetType())
			break
		}
		require.ErrorIs(t, err, client.ErrPending)
		require.False(t, time.Now().After(deadline), "the cancelled call never ended")
	}

	// A call that dies: the worker dead-letters it.
	res, err = s.client.Call(ctx, "flaky", []byte(`{}`))
	require.NoError(t, err)
	require.False(t, res.OK())

	var row []string
	for deadline := time.Now().Add(10 * time.Second); row == nil; {
		out := s.toolctl(t, "dlq", "list")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		row = rowRe.FindStringSubmatch(out.stdout)
		require.False(t, row == nil && time.Now().After(deadline), "no dead letter listed:\n%s", out.stdout)
	}
	out := s.toolctl(t, "dlq", "show", row[1])
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, row[3])

	// Retried by the dispatcher on the operator's request.
	out = s.toolctl(t, "dlq", "retry", row[1])
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	newID := strings.TrimSpace(out.stdout)
	require.Regexp(t, `^[0-9A-Z]{26}$`, newID)
	got, err := s.client.GetResult(ctx, newID, 30*time.Second)
	require.NoError(t, err)
	require.False(t, got.OK(), "the retried call ran (and failed again)")

	out = s.toolctl(t, "audit", "--tool", "auth_echo")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	var rec struct {
		Outcome string `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.Split(out.stdout, "\n")[0]), &rec), out.stdout)
	require.Equal(t, "ok", rec.Outcome)

	out = s.toolctl(t, "replay", "--tool", "auth_echo", "--wait", "30s")
	require.Equal(t, toolctl.ExitOK, out.code, "stdout: %s\nstderr: %s", out.stdout, out.stderr)

	got, err = s.client.GetResult(ctx, later.CallID, time.Minute)
	require.NoError(t, err)
	require.True(t, got.OK(), "the scheduled retry ran: %v", got.Err())
	require.Equal(t, int32(2), got.Response.GetMeta().GetAttempt())

	require.Empty(t, s.violations(), "a role needed a permission it lacks")
}

// Without the data directory, toolctl has no credentials and says how to
// give them.
func TestToolctlWithoutCredentials(t *testing.T) {
	t.Parallel()
	s := startAuthStack(t, authEcho)
	out := run(t, map[string]string{"TOOLWIRE_NATS_URL": s.natsURL, "TOOLWIRE_DATA": t.TempDir()}, "", "dlq", "list")
	require.Equal(t, toolctl.ExitUsage, out.code)
	require.Contains(t, out.stderr, "Authorization Violation")
	require.Contains(t, out.stderr, "--nats-creds")
	// The flag wins and works from anywhere.
	out = run(t, map[string]string{"TOOLWIRE_NATS_URL": s.natsURL, "TOOLWIRE_DATA": t.TempDir()}, "", "dlq", "list",
		"--nats-creds", bus.CredentialsFile(bus.CredentialsDir(s.data), bus.RoleOperator))
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
}

// toolctl nats-context writes a nats CLI context (server, the operator's
// nkey, the inbox prefix the operator's permissions allow replies on):
// connected as the nats CLI connects with it, a JetStream request is
// answered; with the operator's nkey alone (what the README said) it is
// not (the reply cannot reach an inbox outside the prefix).
func TestNATSContextWorksAsTheCLIUsesIt(t *testing.T) {
	t.Parallel()
	s := startAuthStack(t, authEcho)
	dir := t.TempDir()
	out := run(t, map[string]string{"TOOLWIRE_NATS_URL": s.natsURL, "TOOLWIRE_DATA": s.data}, "", "nats-context", "--dir", dir)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	path := filepath.Join(dir, "toolwire.json")
	require.Contains(t, out.stdout, path)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	var c struct {
		URL         string `json:"url"`
		NKey        string `json:"nkey"`
		InboxPrefix string `json:"inbox_prefix"`
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &c))
	require.Equal(t, s.natsURL, c.URL)
	require.True(t, filepath.IsAbs(c.NKey), c.NKey)

	streamNames := func(opts ...nats.Option) error {
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		require.NoError(t, err)
		nc, err := nats.Connect(c.URL, append([]nats.Option{opt}, opts...)...)
		require.NoError(t, err)
		defer nc.Close()
		// The JetStream API's account info, as `nats account info` asks.
		_, err = nc.Request("$JS.API.INFO", nil, 2*time.Second)
		return err
	}
	require.NoError(t, streamNames(nats.CustomInboxPrefix(c.InboxPrefix)), "with the context's inbox prefix")
	require.Error(t, streamNames(), "the nkey alone: the reply has nowhere to go")

	out = run(t, nil, "", "nats-context", "--dir", dir, "--name", "../escape", "--nats-creds", c.NKey)
	require.Equal(t, toolctl.ExitUsage, out.code)
}
