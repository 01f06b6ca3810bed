package dispatchd_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// With --pools-credentials the dispatcher makes a credential per pool
// next to the roles' (pool-<name>.nk), and a worker of that pool on the
// same machine (--pool, no --nats-creds) finds and uses it: it registers
// its tools, has its consumer made by the dispatchers (its credential
// creates none) and runs calls end to end.
func TestPoolCredentialRunsItsPoolsCalls(t *testing.T) {
	t.Parallel()
	data, logs := t.TempDir(), &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: data, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", Workers: "none",
			PoolsCredentials: []string{"echoes"}, Grace: 5 * time.Second, Ready: ready, Logger: logs.JSONLogger()})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var api string
	select {
	case api = <-ready:
	case err := <-done:
		t.Fatalf("dispatcher stopped: %v", err)
	}
	require.Contains(t, logs.String(), `"created":"worker,operator,pool-echoes"`)
	poolFile := bus.CredentialsFile(bus.CredentialsDir(data), bus.PoolRole("echoes"))
	fi, err := os.Stat(poolFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	m := natsPortRe.FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	natsURL := "nats://127.0.0.1:" + m[1]

	echo := tool.Must(tool.New("pool_echo", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	var wlogs logtest.Buffer
	wctx, wcancel := context.WithCancel(context.Background())
	wready, wdone := make(chan string, 1), make(chan error, 1)
	go func() {
		wdone <- toolworker.Run(wctx, toolworker.Options{NATSURL: natsURL, DataDir: data, Pool: "echoes", Tools: []*tool.Tool{echo},
			Grace: 5 * time.Second, Ready: wready, Logger: wlogs.JSONLogger()})
	}()
	t.Cleanup(func() {
		wcancel()
		require.NoError(t, <-wdone)
	})
	select {
	case <-wready:
	case err := <-wdone:
		t.Fatalf("the worker ended: %v\n%s", err, wlogs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never served:\n%s", wlogs.String())
	}
	require.Contains(t, wlogs.String(), poolFile, "the worker took its pool's credential")

	c, err := client.New("http://" + api)
	require.NoError(t, err)
	// The worker is ready once it serves; the dispatcher knows the tool
	// once its registry watch brings the announcement (a CI run called
	// before that and got NOT_FOUND).
	require.Eventually(t, func() bool {
		specs, err := c.ListTools(t.Context())
		return err == nil && slices.ContainsFunc(specs, func(s *toolwirev1.ToolSpec) bool { return s.GetName() == "pool_echo" })
	}, time.Minute, 20*time.Millisecond, "the dispatcher lists pool_echo")
	res, err := c.Call(t.Context(), "pool_echo", []byte(`{"text":"through the pool's own credential"}`))
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Err())
	require.Equal(t, "through the pool's own credential", res.Text())

	// The same credential may not create a consumer on CALLS.
	nc, err := bus.Dial(bus.ConnConfig{URL: natsURL, CredsFile: poolFile, InboxPrefix: bus.InboxPrefix(bus.Config{}, bus.PoolRole("echoes"))},
		nats.MaxReconnects(0))
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Request("$JS.API.CONSUMER.CREATE.TOOLWIRE_CALLS.evil", []byte(`{"stream_name":"TOOLWIRE_CALLS","config":{"name":"evil"}}`), 2*time.Second)
	require.Error(t, err)
	until := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `Publish Violation - Subject \"$JS.API.CONSUMER.CREATE.TOOLWIRE_CALLS.evil\"`) {
		require.True(t, time.Now().Before(until), "the server logs the refused create:\n%s", logs.String())
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	require.Equal(t, 1, strings.Count(logs.String(), "Violation"), "the worker itself needed nothing its credential refuses:\n%s", logs.String())
}

// --pools-credentials needs the embedded listener.
func TestPoolsCredentialsNeedTheListener(t *testing.T) {
	t.Parallel()
	err := dispatchd.Run(t.Context(), dispatchd.RunConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Workers: "none",
		PoolsCredentials: []string{"a"}, Logger: (&logtest.Buffer{}).JSONLogger()})
	require.ErrorContains(t, err, "needs --nats-listen")
}
