package toolworker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// readyz GETs /readyz: its status and body.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// until polls cond every 20ms until it holds, failing after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// A worker on its pool's credential (bus.PoolRole, which may create no
// consumer) has its pool's consumer put back by the dispatchers when
// someone with every permission changes it (max deliveries 5 → 2) or
// deletes it, logs it at warn, and is not ready meanwhile. A
// blocker — another pool's consumer over the same tool, which EnsurePool
// refuses as an overlap — holds the repair off so that "meanwhile" can be
// seen; once it is gone, the consumer is back within seconds.
func TestWorkerPutsBackItsPoolConsumer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := bustest.StartWithRoles(t, "native")
	srv, credDir, admin := env.Server, env.Creds.Dir, env.Bus
	serveRegistry(t, admin) // workers register through the dispatchers

	echo := tool.Must(tool.New("guard_echo", func(_ context.Context, in struct{ Text string }) (string, error) { return in.Text, nil }))
	var logs logtest.Buffer
	wctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- toolworker.Run(wctx, toolworker.Options{SigningKey: testKeyFile, NATSURL: srv.ClientURL(), NATSCreds: bus.CredentialsFile(credDir, bus.PoolRole("native")),
			Pool: "native", Tools: []*tool.Tool{echo}, HTTPAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Ready: ready, Grace: time.Second,
			Logger: logs.JSONLogger()})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("the worker ended: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never served:\n%s", logs.String())
	}
	code, body := readyz(t, addr)
	require.Equal(t, http.StatusOK, code, body)

	name := admin.Config.PoolConsumer("native")
	live := func() *jetstream.ConsumerInfo {
		cons, err := admin.Calls.Consumer(ctx, name)
		if err != nil {
			return nil
		}
		return cons.CachedInfo()
	}
	declared := live()
	require.NotNil(t, declared)
	require.Equal(t, 5, declared.Config.MaxDeliver)
	blocker := jetstream.ConsumerConfig{Durable: admin.Config.PoolConsumer("blocker"), FilterSubject: declared.Config.FilterSubject,
		AckPolicy: jetstream.AckExplicitPolicy}
	block := func() {
		_, err := admin.Calls.CreateConsumer(ctx, blocker)
		require.NoError(t, err)
	}
	unblock := func() { require.NoError(t, admin.Calls.DeleteConsumer(ctx, blocker.Durable)) }
	notReady := func(want string) {
		t.Helper()
		until(t, 10*time.Second, "/readyz fails", func() bool {
			code, body := readyz(t, addr)
			return code == http.StatusServiceUnavailable && strings.Contains(body, want)
		})
	}

	// Changed: max deliveries 5 → 2.
	edited := declared.Config
	edited.MaxDeliver = 2
	block()
	_, err := admin.Calls.UpdateConsumer(ctx, edited)
	require.NoError(t, err)
	notReady("max_deliver: 2 → 5")
	unblock()
	until(t, 30*time.Second, "the consumer is put back", func() bool {
		ci := live()
		return ci != nil && ci.Config.MaxDeliver == 5
	})
	code, body = readyz(t, addr)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, logs.String(), `"level":"WARN","msg":"pool consumer differs from its declared configuration: put back"`)

	// Deleted.
	block()
	require.NoError(t, admin.Calls.DeleteConsumer(ctx, name))
	notReady("missing")
	unblock()
	until(t, 30*time.Second, "the consumer is re-created, and fetched from", func() bool {
		ci := live()
		return ci != nil && ci.Config.MaxDeliver == 5 && ci.NumWaiting > 0
	})
	code, body = readyz(t, addr)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, logs.String(), `"level":"WARN","msg":"pool consumer missing: re-created with its declared configuration`)
	require.Empty(t, bus.PoolDrift(live().Config, declared.Config), "as declared")

	// Deleted with nothing in the way: back within seconds.
	require.NoError(t, admin.Calls.DeleteConsumer(ctx, name))
	until(t, 15*time.Second, "the consumer is re-created", func() bool { return live() != nil })
}
