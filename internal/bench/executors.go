package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/worker"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ExecutorPair is one executor measured through toolwire and directly.
type ExecutorPair struct {
	Name              string
	Through, Directly Result
}

// ExecutorLevels are the calls in flight and calls of each executor pair.
var ExecutorLevels = map[string][2]int{
	"sandbox": {2 * runtime.NumCPU(), 400},
	"mcp":     {16, 3000},
	"http":    {16, 5000},
}

// RunExecutors measures, in one run, each executor type through toolwire
// (dispatcher core over NATS, a worker, the executor) against doing the
// same work directly: `true` through the sandbox vs a bare exec, an MCP
// call vs a direct SDK call to the same server, an HTTP tool vs a direct
// net/http request to the same server.
func RunExecutors(ctx context.Context, cfg Config, out io.Writer) ([]ExecutorPair, error) {
	cfg = cfg.WithDefaults()
	var pairs []ExecutorPair
	for _, m := range []func(context.Context, Config) (ExecutorPair, error){measureSandbox, measureMCP, measureHTTP} {
		p, err := m(ctx, cfg)
		if err != nil {
			return pairs, err
		}
		fmt.Fprintln(out, p.Through.Line())
		fmt.Fprintln(out, p.Directly.Line())
		pairs = append(pairs, p)
	}
	return pairs, nil
}

// WriteExecutorTable writes the markdown table of pairs.
func WriteExecutorTable(w io.Writer, pairs []ExecutorPair) {
	fmt.Fprintln(w, "| executor | in flight | through toolwire calls/s | p50 / p99 ms | directly calls/s | p50 / p99 ms | overhead p50 |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---|---:|")
	for _, p := range pairs {
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f / %.2f | %.0f | %.2f / %.2f | +%.2f ms |\n", p.Name, p.Through.InFlight,
			p.Through.CallsPerSec(), ms(p.Through.P50), ms(p.Through.P99), p.Directly.CallsPerSec(), ms(p.Directly.P50), ms(p.Directly.P99),
			ms(p.Through.P50-p.Directly.P50))
	}
}

// measurePair measures fn through toolwire (a call of spec served by exec
// in a worker) and direct.
func measurePair(ctx context.Context, cfg Config, name string, typ toolwirev1.ExecutorType, exec executors.Executor,
	spec *toolwirev1.ToolSpec, args string, check func(*toolwirev1.ToolResponse) error, direct callFunc) (p ExecutorPair, err error) {
	inflight, n := ExecutorLevels[name][0], ExecutorLevels[name][1]
	p.Name = name
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return p, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	nc, err := e.connect("bench-dispatcher")
	if err != nil {
		return p, err
	}
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	if err != nil {
		return p, err
	}
	wnc, err := e.connect("bench-worker")
	if err != nil {
		return p, err
	}
	wb, err := bus.Open(ctx, wnc, bus.Config{}, bus.Options{})
	if err != nil {
		return p, err
	}
	w, err := worker.New(wb, worker.Config{Name: "bench-" + name, Logger: cfg.Logger,
		Pools:     []worker.Pool{{Concurrency: inflight, PoolConfig: bus.PoolConfig{Type: typ}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{typ: exec}, Specs: []*toolwirev1.ToolSpec{spec},
		Registry: registry.NewRegistrar(b, cfg.Logger, nil, "")})
	if err != nil {
		return p, err
	}
	if err := w.Start(ctx); err != nil {
		return p, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, w.Stop(sctx))
	}()
	reg := registry.NewStore(b.Registry, cfg.Logger)
	if err := reg.Start(ctx); err != nil {
		return p, err
	}
	defer reg.Stop(context.Background())
	if err := waitTool(ctx, reg, spec.Name); err != nil {
		return p, err
	}
	d, err := dispatch.New(b, reg, dispatch.Config{Name: "bench", Logger: cfg.Logger, MaxWaitingPerCaller: -1})
	if err != nil {
		return p, err
	}
	if err := d.Start(ctx); err != nil {
		return p, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, d.Stop(sctx))
	}()
	through := func(ctx context.Context) error {
		r, err := d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: spec.Name, ArgumentsJson: args}, callWait)
		if err != nil {
			return err
		}
		if r.State != toolwirev1.CallState_CALL_STATE_DONE {
			return fmt.Errorf("no answer within %s", callWait)
		}
		return check(r.Response)
	}
	warm := max(n/10, 10)
	// Interleaved: direct, through, so neither gets a quieter machine.
	if _, _, err := drive(ctx, inflight, warm, direct); err != nil {
		return p, fmt.Errorf("%s direct warm-up: %w", name, err)
	}
	if _, _, err := drive(ctx, inflight, warm, through); err != nil {
		return p, fmt.Errorf("%s warm-up: %w", name, err)
	}
	cpu := startCPU()
	lat, wall, err := drive(ctx, inflight, n, direct)
	if err != nil {
		return p, fmt.Errorf("%s direct: %w", name, err)
	}
	p.Directly = summarise(name+"-direct", inflight, lat, wall, cpu.since())
	cpu = startCPU()
	lat, wall, err = drive(ctx, inflight, n, through)
	if err != nil {
		return p, fmt.Errorf("%s through toolwire: %w", name, err)
	}
	p.Through = summarise(name+"-toolwire", inflight, lat, wall, cpu.since())
	return p, nil
}

// readOnly marks a benchmark tool safe to rerun, like the echo tool of the
// main benchmark: a tool that is not pays one more durable write per call
// (its STARTED record before it runs).
func readOnly() *toolwirev1.ToolAnnotations {
	t := true
	return &toolwirev1.ToolAnnotations{ReadOnly: &t, Idempotent: &t}
}

func okText(want string) func(*toolwirev1.ToolResponse) error {
	return func(r *toolwirev1.ToolResponse) error {
		if !r.GetOk() {
			return fmt.Errorf("tool error: %v", r.GetError())
		}
		if want != "" && (len(r.Content) == 0 || r.Content[0].GetText().GetText() != want) {
			return fmt.Errorf("unexpected content %v", r.Content)
		}
		return nil
	}
}

func measureSandbox(ctx context.Context, cfg Config) (ExecutorPair, error) {
	exe, err := sandbox.New(sandbox.Config{Logger: cfg.Logger})
	if err != nil {
		return ExecutorPair{}, fmt.Errorf("bench: sandbox: %w", err)
	}
	defer func() { _ = exe.Close(context.Background()) }()
	spec := &toolwirev1.ToolSpec{Name: "true", Provider: "bench", Summary: "Runs /bin/true.", Description: "Runs /bin/true.",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, InputSchemaJson: `{"type":"object"}`, Annotations: readOnly(),
		Config: &toolwirev1.ToolSpec_Sandbox{Sandbox: &toolwirev1.SandboxConfig{Argv: []string{"/bin/true"}}}}
	direct := func(ctx context.Context) error { return exec.CommandContext(ctx, "/bin/true").Run() }
	return measurePair(ctx, cfg, "sandbox", toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, exe, spec, `{}`, okText(""), direct)
}

type benchEchoIn struct {
	Text string `json:"text"`
}

func measureMCP(ctx context.Context, cfg Config) (p ExecutorPair, err error) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes text.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in benchEchoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer ts.Close()
	exe, err := mcp.New(ctx, mcp.Config{Servers: []mcp.ServerConfig{{Name: "bench", HTTP: &mcp.HTTPConfig{URL: ts.URL}, Required: true}}},
		mcp.Options{Logger: cfg.Logger})
	if err != nil {
		return p, fmt.Errorf("bench: mcp: %w", err)
	}
	defer func() { err = errors.Join(err, exe.Close(context.Background())) }()
	var spec *toolwirev1.ToolSpec
	for _, s := range exe.Specs() {
		if s.GetMcp().GetTool() == "echo" {
			spec = s
		}
	}
	if spec == nil {
		return p, errors.New("bench: mcp: the echo tool was not imported")
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		return p, fmt.Errorf("bench: mcp direct: %w", err)
	}
	defer func() { _ = cs.Close() }()
	direct := func(ctx context.Context) error {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}})
		if err != nil {
			return err
		}
		if t, ok := res.Content[0].(*sdk.TextContent); !ok || t.Text != "ping" {
			return fmt.Errorf("unexpected content %v", res.Content)
		}
		return nil
	}
	return measurePair(ctx, cfg, "mcp", toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP, exe, spec, `{"text":"ping"}`, okText("ping"), direct)
}

func measureHTTP(ctx context.Context, cfg Config) (ExecutorPair, error) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, r.URL.Query().Get("text"))
	}))
	defer ts.Close()
	host, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	portN, _ := strconv.Atoi(port)
	exe, err := httpexec.New(httpexec.Config{Logger: cfg.Logger})
	if err != nil {
		return ExecutorPair{}, fmt.Errorf("bench: http: %w", err)
	}
	defer func() { _ = exe.Close(context.Background()) }()
	spec := &toolwirev1.ToolSpec{Name: "get_echo", Provider: "bench", Summary: "Echo over HTTP.", Description: "Echo over HTTP.",
		Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, Annotations: readOnly(),
		InputSchemaJson: `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{Method: "GET", UrlTemplate: ts.URL + "/echo",
			QueryArgs: []string{"text"}, AllowNetworks: []string{host + "/32"}, AllowPorts: []int32{int32(portN)}}}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	url := ts.URL + "/echo?text=ping"
	direct := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "ping" {
			return fmt.Errorf("unexpected body %q: %v", b, err)
		}
		return nil
	}
	return measurePair(ctx, cfg, "http", toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, exe, spec, `{"text":"ping"}`, okText("ping"), direct)
}
