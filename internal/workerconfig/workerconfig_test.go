package workerconfig_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	os.Exit(m.Run())
}

func TestParse(t *testing.T) {
	t.Parallel()
	f, err := workerconfig.Parse([]byte(`
pools:
  - {type: sandbox, concurrency: 4}
  - {type: http, ack_wait: 1m}
tools: [./tools]
vars: {API: "http://127.0.0.1:9"}
sandbox: {wall_time: 10s, memory_bytes: 268435456}
http: {timeout: 5s, allow_networks: [10.0.0.0/8]}
mcp:
  servers:
    - name: files
      stdio: {command: /usr/bin/node, args: [server.js]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Pools) != 2 || f.Pools[0].Concurrency != 4 || time.Duration(f.Pools[1].AckWait) != time.Minute ||
		time.Duration(f.Sandbox.WallTime) != 10*time.Second || len(f.MCP.Servers) != 1 {
		t.Fatalf("parsed: %+v", f)
	}
	for _, c := range []struct{ doc, want string }{
		{"pools: [{type: shell}]", `"shell"`},
		{"pools: [{type: http}, {type: http}]", "listed twice"},
		{"pools: [{type: http, name: a}, {type: http, name: b}]", "a second http pool"},
		{"pools: [{type: http, concurrency: -1}]", "negative"},
		{"colour: blue", "colour"},
		{"tools: ['']", "empty"},
		{"sandbox: {wall_time: 5}", "duration"},
		{"mcp: {servers: [{name: 'bad name!'}]}", "mcp"},
	} {
		if _, err := workerconfig.Parse([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: want an error containing %q, got %v", c.doc, c.want, err)
		}
	}
}

// Spec files see TOOLWIRE_VAR_* environment variables only: a spec is
// published for every caller to read.
func TestSpecVarsFromTheEnvironment(t *testing.T) {
	t.Setenv("TOOLWIRE_VAR_TEST_API", "http://127.0.0.1:9")
	t.Setenv("SECRET_TOKEN", "do-not-publish")
	t.Setenv("TOOLWIRE_API_KEY", "do-not-publish-either")
	dir := t.TempDir()
	spec := func(url string) string {
		return "name: ping\nsummary: Pings.\ndoc: Pings.\nexecutor: http\ninput_schema: {type: object}\n" +
			"http: {method: GET, url_template: \"" + url + "\", allow_networks: [127.0.0.1/32], allow_ports: [9]}\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "ping.yaml"), []byte(spec("${TOOLWIRE_VAR_TEST_API}/ping")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "worker.yaml")
	if err := os.WriteFile(cfg, []byte("tools: [ping.yaml]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := workerconfig.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := bustest.Start(t, bus.Config{})
	w, err := workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler), Registry: registry.NewRegistrar(env.Bus, nil, nil, "")})
	if err != nil {
		t.Fatalf("a TOOLWIRE_ variable: %v", err)
	}
	_ = w.Stop(t.Context()) // closes its executors; it never started
	if err := os.WriteFile(filepath.Join(dir, "ping.yaml"), []byte(spec("http://127.0.0.1:9/${SECRET_TOKEN}")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler), Registry: registry.NewRegistrar(env.Bus, nil, nil, "")}); err == nil ||
		!strings.Contains(err.Error(), "unknown variable ${SECRET_TOKEN}") || strings.Contains(err.Error(), "do-not-publish") {
		t.Fatalf("another variable: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ping.yaml"), []byte(spec("http://127.0.0.1:9/${TOOLWIRE_API_KEY}")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler), Registry: registry.NewRegistrar(env.Bus, nil, nil, "")}); err == nil ||
		!strings.Contains(err.Error(), "unknown variable") {
		t.Fatalf("a toolwire setting: %v", err)
	}
}

// A sandbox tool with network access shares the worker's network
// namespace: the worker refuses to start with one unless the operator
// allowed it (sandbox.host_network), and then says so in the responses.
func TestNetworkSandboxToolNeedsHostNetwork(t *testing.T) {
	dir := t.TempDir()
	toolFile := "name: fetch\nsummary: Fetches.\ndoc: Fetches.\nexecutor: sandbox\n" +
		"input_schema: {type: object}\nsandbox: {argv: [/bin/true], network: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "fetch.yaml"), []byte(toolFile), 0o600); err != nil {
		t.Fatal(err)
	}
	env := bustest.Start(t, bus.Config{})
	for _, c := range []struct {
		config string
		ok     bool
	}{
		{"tools: [fetch.yaml]\n", false},
		{"tools: [fetch.yaml]\nsandbox: {host_network: true, egress_ports: [443]}\n", true},
	} {
		cfg := filepath.Join(dir, "worker.yaml")
		if err := os.WriteFile(cfg, []byte(c.config), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := workerconfig.Load(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := workerconfig.NewWorker(t.Context(), env.Bus, f, workerconfig.Options{Logger: slog.New(slog.DiscardHandler), Registry: registry.NewRegistrar(env.Bus, nil, nil, "")})
		if !c.ok {
			if err == nil || !strings.Contains(err.Error(), "sandbox.host_network") {
				t.Fatalf("%q: want a refusal naming sandbox.host_network, got %v", c.config, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.config, err)
		}
		_ = w.Stop(t.Context()) // closes its executors; it never started
	}
}
