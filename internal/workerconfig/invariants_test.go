package workerconfig_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// httpWorkerFile writes a worker configuration serving an HTTP pool with
// one spec-file tool named name, and loads it.
func httpWorkerFile(t *testing.T, name string) *workerconfig.File {
	t.Helper()
	dir := t.TempDir()
	spec := "name: " + name + "\nsummary: Pings.\ndoc: Pings.\nexecutor: http\ninput_schema: {type: object}\n" +
		"http: {method: GET, url_template: \"http://127.0.0.1:9/ping\", allow_networks: [127.0.0.1/32], allow_ports: [9]}\n"
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "worker.yaml")
	if err := os.WriteFile(cfg, []byte("pools: [{type: http}]\ntools: ["+name+".yaml]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := workerconfig.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// startWorker builds and starts a worker, stopped when the test ends; it
// returns Start's error.
func startWorker(t *testing.T, b *bus.Bus, f *workerconfig.File, o workerconfig.Options) error {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	o.Registry = registry.NewRegistrar(b, o.Logger, nil, "") // no dispatcher runs: write as one would
	w, err := workerconfig.NewWorker(t.Context(), b, f, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w.Start(t.Context())
}

// registered returns the registry's current spec of name, or nil.
func registered(t *testing.T, b *bus.Bus, name string) *toolwirev1.ToolSpec {
	t.Helper()
	e, err := b.Registry.Get(t.Context(), name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var spec toolwirev1.ToolSpec
	if err := proto.Unmarshal(e.Value(), &spec); err != nil {
		t.Fatal(err)
	}
	return &spec
}

// A worker that serves no native pool publishes none of the binary's
// native tools: registered, their calls would be admitted with no
// consumer and stay PENDING for good.
func TestWorkerPublishesOnlyToolsOfPoolsItServes(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	if err := startWorker(t, env.Bus, httpWorkerFile(t, "ping"), workerconfig.Options{Tools: builtin.Tools()}); err != nil {
		t.Fatal(err)
	}
	if registered(t, env.Bus, "ping") == nil {
		t.Fatal("the HTTP tool is not registered")
	}
	for _, name := range []string{"echo", "fail", "remember", "sleep"} {
		if spec := registered(t, env.Bus, name); spec != nil {
			t.Errorf("built-in %s is registered by a worker with no native pool", name)
		}
	}
}

// A tool name another pool defines is refused at start-up, naming both;
// the registry keeps the first definition. (A spec-file tool named echo
// used to replace the built-in, and then every echo call failed.)
func TestToolNameOfAnotherPoolIsRefused(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	if err := startWorker(t, env.Bus, nil, workerconfig.Options{PoolTypes: []string{"native"}, Tools: builtin.Tools()}); err != nil {
		t.Fatal(err)
	}
	err := startWorker(t, env.Bus, httpWorkerFile(t, "echo"), workerconfig.Options{})
	if !errors.Is(err, registry.ErrClaimed) {
		t.Fatalf("a second definition of echo: want ErrClaimed, got %v", err)
	}
	for _, want := range []string{`tool "echo"`, `pool "native"`, `pool "http"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if spec := registered(t, env.Bus, "echo"); spec.GetExecutor() != toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE {
		t.Fatalf("echo is now %v", spec)
	}
	// The refused pool's consumer was not extended to the tool.
	if cons, err := env.Bus.Calls.Consumer(t.Context(), env.Bus.Config.PoolConsumer("http")); err == nil {
		t.Fatalf("the refused pool has a consumer: %v", bus.ConsumerFilters(cons.CachedInfo().Config))
	}

	// The same pool again (another replica, or the next version in a
	// rolling upgrade) is the same source.
	if err := startWorker(t, env.Bus, nil, workerconfig.Options{PoolTypes: []string{"native"}, Tools: builtin.Tools()}); err != nil {
		t.Fatalf("a second replica of the pool: %v", err)
	}
}

// One worker defining a tool twice (a native tool and a spec-file tool of
// one name) is refused: one would silently replace the other.
func TestToolDefinedTwiceByOneWorkerIsRefused(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	f := httpWorkerFile(t, "echo")
	f.Pools = append(f.Pools, workerconfig.PoolFile{Type: "native"})
	err := startWorker(t, env.Bus, f, workerconfig.Options{Tools: builtin.Tools()})
	if err == nil || !strings.Contains(err.Error(), `tool "echo" is defined twice`) {
		t.Fatalf("want a refusal naming echo, got %v", err)
	}
	if spec := registered(t, env.Bus, "echo"); spec != nil {
		t.Fatalf("echo was registered: %v", spec)
	}
}
