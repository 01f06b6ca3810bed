package toolworker_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// --ensure-only leaves the pool's consumer and its registered tools behind
// and exits 0 without serving: the Helm chart's step for pools that scale
// to zero.
func TestEnsureOnlyCreatesConsumerPublishesToolsAndExits(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	serveRegistry(t, env.Bus) // a dispatcher writes what the worker announces
	echo := tool.Must(tool.New("ensure_only_echo", func(_ context.Context, in struct{ Text string }) (string, error) {
		return in.Text, nil
	}))
	var stderr bytes.Buffer
	code := toolworker.MainArgs([]string{"--nats-url", env.URL, "--pool", "search", "--pools", "native",
		"--http", "127.0.0.1:0", "--ensure-only"}, &stderr, echo)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stderr.String(), "--ensure-only")

	cons, err := env.Bus.Calls.Consumer(t.Context(), "toolwire_pool_search")
	require.NoError(t, err)
	info, err := cons.Info(t.Context())
	require.NoError(t, err)
	require.Len(t, bus.ConsumerFilters(info.Config), 1)
	require.Zero(t, info.NumWaiting, "nothing fetches from the consumer")
	_, err = env.Bus.Registry.Get(t.Context(), "ensure_only_echo")
	require.NoError(t, err, "the tool is registered, so calls for it are admitted")
}

func TestEnsureOnlyRefusesShadow(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	var stderr bytes.Buffer
	code := toolworker.MainArgs([]string{"--nats-url", env.URL, "--http", "", "--shadow", "--ensure-only"}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Contains(t, stderr.String(), "--ensure-only does not apply to a --shadow worker")
}

// A pool named <x>-<type> without a credential of its own (the worker
// credential) is a pool name like any other when it runs <type> tools, as
// through --config: an existing single-type pool keeps its name, its
// consumer and its tools. Before, --pool refused it as the part of pool x
// even with the shared credential. A name ending in another type's token
// is refused before connecting.
func TestPoolNamedAfterItsTypeWithoutItsOwnCredential(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	code := toolworker.MainArgs([]string{"--nats-url", "nats://127.0.0.1:1", "--http", "", "--pool", "search-http", "--pools", "native"}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Contains(t, stderr.String(), "rename the pool")

	env := bustest.Start(t, bus.Config{})
	serveRegistry(t, env.Bus)
	echo := tool.Must(tool.New("web_native_echo", func(_ context.Context, in struct{ Text string }) (string, error) {
		return in.Text, nil
	}))
	stderr.Reset()
	code = toolworker.MainArgs([]string{"--nats-url", env.URL, "--pool", "web-native", "--pools", "native",
		"--http", "", "--ensure-only"}, &stderr, echo)
	require.Equal(t, 0, code, stderr.String())
	_, err := env.Bus.Calls.Consumer(t.Context(), "toolwire_pool_web-native")
	require.NoError(t, err)
}
