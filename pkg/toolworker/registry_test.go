package toolworker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolworker"
	"google.golang.org/protobuf/proto"
)

// serveRegistry runs, on b, the registry service every dispatcher runs:
// workers announce their tools to it and it writes the registry.
func serveRegistry(t *testing.T, b *bus.Bus) {
	t.Helper()
	svc := registry.NewService(b, slog.New(slog.DiscardHandler), testTrust, "")
	require.NoError(t, svc.Start(t.Context()))
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

// serveRegistryAt opens the layout on the cluster at url (as a
// dispatcher does, waiting while the cluster cannot answer) and serves
// the registry there.
func serveRegistryAt(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
		cancel()
		if err == nil {
			serveRegistry(t, b)
			return
		}
		if !bus.Unavailable(err) || time.Now().After(deadline) {
			t.Fatalf("open the layout: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}
}

// A worker process, with the worker credential a dispatcher makes (which
// may not write the registry), registers its tools through the
// dispatchers: they record its pool as the tools' source and write the
// specs.
func TestWorkerRegistersThroughTheDispatchers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := bustest.StartWithRoles(t)
	srv, creds, b := env.Server, env.Creds, env.Bus
	serveRegistry(t, b)

	echo := tool.Must(tool.New("announced_echo", func(_ context.Context, in struct{ Text string }) (string, error) { return in.Text, nil }))
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- toolworker.Run(wctx, toolworker.Options{SigningKey: testKeyFile, NATSURL: srv.ClientURL(), NATSCreds: bus.CredentialsFile(creds.Dir, bus.RoleWorker),
			Pool: "announcers", Tools: []*tool.Tool{echo}, Ready: ready, Grace: time.Second, Logger: slog.New(slog.DiscardHandler)})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the worker ended: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never served")
	}
	e, err := b.Registry.Get(ctx, "announced_echo")
	require.NoError(t, err)
	var spec toolwirev1.ToolSpec
	require.NoError(t, proto.Unmarshal(e.Value(), &spec))
	require.Equal(t, registry.Version(&spec), spec.Version, "the dispatcher stamped the content's version")
	src, err := b.Registry.Get(ctx, registry.SourceKey("announced_echo"))
	require.NoError(t, err)
	require.Contains(t, string(src.Value()), `"pool":"announcers"`)
	cancel()
	require.NoError(t, <-done)
}
