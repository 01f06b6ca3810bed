package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policy/policytest"
	"github.com/toolwire/toolwire/internal/registry"
	workerpkg "github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// echoArgs are the arguments of every echo call.
const echoArgs = `{"text":"ping"}`

// callWait is how long a benchmark call waits for its result before it
// counts as failed.
const callWait = 30 * time.Second

// stackOptions choose the parts of a stack.
type stackOptions struct {
	// worker starts an in-process worker pool of this concurrency on its
	// own connection; 0 = no worker (the native pool's consumer is
	// created and the built-in specs are published, as a worker would, so
	// calls are admitted and stay queued).
	worker int
	// http serves the Connect API on loopback and builds a client for it.
	http bool
	// mcp serves the MCP endpoint too and connects an MCP client to it
	// (with http).
	mcp bool
	// maxBacklog is the dispatcher's pool backlog bound (0 = its default).
	maxBacklog int
	// maxQueueWait is the dispatcher's bound on a call's expected queue
	// wait (Config.MaxQueueWait; 0 = its default).
	maxQueueWait time.Duration
	// policy is the policy in force on the dispatcher; nil = none.
	policy *policy.Policy
	// busConfig is the stores' configuration of every bus.Open of the
	// stack (the dispatcher's and the workers', which would otherwise set
	// a bucket back to its default size); zero = the defaults.
	busConfig bus.Config
	// parents starts a second in-process worker with this many slots,
	// serving only bench_parent in a pool of its own (parentPool); 0 =
	// none, and no bench_parent.
	parents int
}

// stack is a running toolwire: dispatcher, registry watcher, an optional
// worker pool and an optional HTTP API, all on one env.
type stack struct {
	bus    *bus.Bus
	reg    *registry.Store
	d      *dispatch.Dispatcher
	worker *workerconfig.Worker

	srv       *http.Server
	serveDone chan error
	transport *http.Transport
	client    toolwirev1connect.DispatcherServiceClient
	base      string             // the HTTP server's URL
	mcp       *mcp.ClientSession // with stackOptions.mcp

	// warmUntil is when the worker's start-up costs are over: calls
	// admitted earlier also look their cancel key up (worker.ClockSkew).
	warmUntil time.Time

	// gate holds bench_parent's calls until stop (or MeasureShaped's
	// drain) opens it; parentWorker serves them (stackOptions.parents).
	gate         *parentGate
	parentWorker *workerconfig.Worker
}

// startStack starts a stack on e. On error everything started is stopped.
func startStack(ctx context.Context, e *env, o stackOptions) (s *stack, err error) {
	log := e.cfg.Logger
	started := &stack{gate: newParentGate()} // s is nil on every error return: stop what started
	s = started
	defer func() {
		if err != nil {
			started.stop()
			s = nil
		}
	}()
	nc, err := e.connect("bench-dispatcher")
	if err != nil {
		return nil, err
	}
	if s.bus, err = bus.Open(ctx, nc, o.busConfig, bus.Options{}); err != nil {
		return nil, err
	}
	if o.parents > 0 {
		if s.parentWorker, err = s.startWorker(ctx, e, workerOptions{name: "bench-parents", pool: parentPool,
			tools: []*tool.Tool{benchParent(s.gate)}, concurrency: o.parents, busConfig: o.busConfig}); err != nil {
			return nil, err
		}
	}
	if o.worker > 0 {
		if s.worker, err = s.startWorker(ctx, e, workerOptions{name: "bench-worker", tools: benchTools(), concurrency: o.worker,
			busConfig: o.busConfig}); err != nil {
			return nil, err
		}
		s.warmUntil = time.Now().Add(workerpkg.ClockSkew)
	} else {
		nat, err := native.NewWithConfig(native.Config{Logger: log}, benchTools()...)
		if err != nil {
			return nil, err
		}
		// A pool's consumer first: admission refuses calls no pool takes.
		if _, err := s.bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}); err != nil {
			return nil, err
		}
		if _, err := registry.Publish(ctx, s.bus.Registry, nat.Specs()); err != nil {
			return nil, err
		}
	}
	reg := registry.NewStore(s.bus.Registry, log)
	if err := reg.Start(ctx); err != nil {
		return nil, err
	}
	s.reg = reg
	if err := waitTool(ctx, reg, "echo"); err != nil {
		return nil, err
	}
	d, err := dispatch.New(s.bus, reg, dispatch.Config{Name: "bench", Logger: log, MaxWaitingPerCaller: -1, MaxBacklog: o.maxBacklog,
		MaxQueueWait: o.maxQueueWait, Policies: onePolicy{o.policy}})
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	s.d = d
	if o.http {
		if err := s.serveHTTP(e.cfg); err != nil {
			return nil, err
		}
	}
	if o.mcp {
		if err := s.connectMCP(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// workerOptions are one in-process worker's.
type workerOptions struct {
	name, pool  string // pool "" = the type's pool (native)
	tools       []*tool.Tool
	concurrency int
	busConfig   bus.Config
}

// startWorker starts an in-process worker on a connection of its own.
func (s *stack) startWorker(ctx context.Context, e *env, o workerOptions) (*workerconfig.Worker, error) {
	log := e.cfg.Logger
	nc, err := e.connect(o.name)
	if err != nil {
		return nil, err
	}
	b, err := bus.Open(ctx, nc, o.busConfig, bus.Options{})
	if err != nil {
		return nil, err
	}
	// In-process, as a dispatcher's own workers: announcements go to
	// the registrar directly (no dispatcher serves them yet).
	w, err := workerconfig.NewWorker(ctx, b, nil, workerconfig.Options{Name: o.name, Pool: o.pool, Tools: o.tools, Concurrency: o.concurrency,
		Logger: log, Registry: registry.NewRegistrar(s.bus, log, nil, "")})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// waitTool polls the registry until it lists name; the watcher fills it
// asynchronously after a publish.
func waitTool(ctx context.Context, reg *registry.Store, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := reg.Get(name); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: tool %q never appeared in the registry: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// serveHTTP serves the Connect API on a loopback port the way
// dispatchd.Run does (HTTP/1.1 and h2c on one listener, default HTTP/2
// settings) and builds a client of the configured protocol.
func (s *stack) serveHTTP(cfg Config) error {
	mux := http.NewServeMux()
	svc, err := api.NewService(api.Config{Core: s.d, Approvals: s.d.Approvals(), Policies: s.d.PolicyOps(), Usage: s.d.LimitGate()})
	if err != nil {
		return fmt.Errorf("bench: api: %w", err)
	}
	mux.Handle(svc.Handler(identity.OpenAccess{Identity: identity.Default}))
	ms, err := mcpserver.New(s.d, identity.OpenAccess{Identity: identity.Default}, mcpserver.Config{Version: "bench", Tasks: s.bus.Tasks})
	if err != nil {
		return fmt.Errorf("bench: mcp: %w", err)
	}
	ms.Handle(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bench: listen: %w", err)
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	s.srv.Protocols.SetHTTP1(true)
	s.srv.Protocols.SetUnencryptedHTTP2(true)
	s.serveDone = make(chan error, 1)
	go func() { s.serveDone <- s.srv.Serve(ln) }()

	s.transport = &http.Transport{
		Protocols:           new(http.Protocols),
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: cfg.InFlight,
		MaxConnsPerHost:     0, // no limit
		IdleConnTimeout:     time.Minute,
		ForceAttemptHTTP2:   false,
	}
	if cfg.HTTP == "http1" {
		s.transport.Protocols.SetHTTP1(true)
	} else {
		// Prior-knowledge h2c. Past the server's stream limit per
		// connection the transport opens more connections.
		s.transport.Protocols.SetUnencryptedHTTP2(true)
	}
	s.base = "http://" + ln.Addr().String()
	s.client = toolwirev1connect.NewDispatcherServiceClient(&http.Client{Transport: s.transport}, s.base)
	return nil
}

// connectMCP connects the official Go SDK's client to the MCP endpoint,
// at the stateless revision, over the stack's HTTP transport: every call
// is a POST of its own, like the Connect client's.
func (s *stack) connectMCP(ctx context.Context) error {
	c := mcp.NewClient(&mcp.Implementation{Name: "toolwire-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + mcpserver.Path,
		HTTPClient: &http.Client{Transport: s.transport}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return fmt.Errorf("bench: connect the MCP client: %w", err)
	}
	s.mcp = cs
	return nil
}

// callMCP makes one echo call as an MCP tools/call.
func (s *stack) callMCP(ctx context.Context) error {
	res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(echoArgs)})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("bench: MCP call failed: %s", mcpText(res.Content))
	}
	if len(res.Content) != 1 {
		return fmt.Errorf("bench: MCP call answered %d blocks, want the text ping", len(res.Content))
	}
	if t, ok := res.Content[0].(*mcp.TextContent); !ok || t.Text != "ping" {
		return fmt.Errorf("bench: MCP call answered %s, want the text ping", mcpText(res.Content))
	}
	return nil
}

// mcpText is the text of an MCP result's blocks, for an error message
// (a block's %v is a pointer); at most 500 bytes.
func mcpText(content []mcp.Content) string {
	var b strings.Builder
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		} else {
			fmt.Fprintf(&b, "[%T]", c)
		}
		if b.Len() > 500 {
			return b.String()[:500] + "…"
		}
	}
	return b.String()
}

// callNATS makes one echo call through the dispatcher core.
func (s *stack) callNATS(ctx context.Context) error {
	resp, err := s.d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: echoArgs}, callWait)
	if err != nil {
		return err
	}
	return checkEcho(resp)
}

// inSessions opens n sessions in the voice mode (SetSessionMode) and
// returns a call of echo on the nats path that names them in turn
// (Config.Sessions).
func (s *stack) inSessions(ctx context.Context, n int) (callFunc, error) {
	names := make([]string, max(n, 1))
	for i := range names {
		names[i] = fmt.Sprintf("bench-s%03d", i)
		if _, err := s.d.SetSessionMode(ctx, identity.Default, names[i], "voice"); err != nil {
			return nil, fmt.Errorf("bench: open session: %w", err)
		}
	}
	var next atomic.Uint64
	return func(ctx context.Context) error {
		session := names[next.Add(1)%uint64(len(names))]
		resp, err := s.d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: echoArgs, Session: session}, callWait)
		if err != nil {
			return err
		}
		return checkEcho(resp)
	}, nil
}

// callHTTP makes one echo call through the Connect API.
func (s *stack) callHTTP(ctx context.Context) error {
	resp, err := s.client.Call(ctx, connect.NewRequest(&toolwirev1.CallRequest{
		Tool: "echo", ArgumentsJson: echoArgs,
		Wait: durationpb.New(callWait),
	}))
	if err != nil {
		return err
	}
	return checkEcho(resp.Msg)
}

// checkEcho fails unless the call finished with echo's answer.
func checkEcho(r *toolwirev1.CallResponse) error {
	if r.State != toolwirev1.CallState_CALL_STATE_DONE {
		return fmt.Errorf("bench: call %s ended %s", r.CallId, r.State)
	}
	if !r.Response.GetOk() {
		return fmt.Errorf("bench: call %s failed: %s: %s", r.CallId, r.Response.GetError().GetType(), r.Response.GetError().GetMessage())
	}
	if c := r.Response.GetContent(); len(c) != 1 || c[0].GetText().GetText() != "ping" {
		return fmt.Errorf("bench: call %s answered %v, want the text ping", r.CallId, c)
	}
	return nil
}

// stop stops the stack in order: the HTTP server (no call is in flight by
// then), the worker (grace 5s), the dispatcher (releasing any waiter), the
// registry watcher. The env closes the connections afterwards.
func (s *stack) stop() error {
	var errs []error
	s.gate.open() // bench_parent's calls end: their worker stops without waiting for them
	if s.mcp != nil {
		errs = append(errs, s.mcp.Close())
	}
	if s.srv != nil {
		// Idle client connections first: Shutdown waits for connections
		// to go idle and polls for it.
		s.transport.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.srv.Shutdown(ctx))
		cancel()
		if err := <-s.serveDone; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	for _, w := range []*workerconfig.Worker{s.worker, s.parentWorker} {
		if w != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, w.Stop(ctx))
			cancel()
		}
	}
	if s.d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.d.Stop(ctx))
		cancel()
	}
	if s.reg != nil {
		_ = s.reg.Stop(context.Background())
	}
	return errors.Join(errs...)
}

// onePolicy is a dispatch.PolicySource with one policy for every tenant.
type onePolicy struct{ p *policy.Policy }

func (o onePolicy) For(string) *policy.Policy { return o.p }

// benchTools are the built-in tools and bench_hook, a native before-hook
// that lets every call go on (Config.Hook). Like any hook that only looks,
// it is read-only and idempotent: its calls need no durable STARTED
// before they run.
func benchTools() []*tool.Tool {
	return append(builtin.Tools(), tool.Must(tool.New("bench_hook", func(context.Context, hook.BeforeRequest) (hook.BeforeAnswer, error) {
		return hook.BeforeAnswer{Action: "continue"}, nil
	}, tool.ReadOnly(), tool.Idempotent())))
}

// hookPolicy is the policy of Config.Hook: every call allowed, one native
// before-hook on echo.
const hookPolicy = `tenant:
  default: allow
loop_guard: {enabled: false}
hooks:
  - {id: bench, phase: before, tool: bench_hook, tools: [echo]}
`

// sessionsPolicy is the policy of Config.Sessions: every call allowed in
// the voice mode every session is in (a mode layer with a rule the call
// passes), spec versions pinned per session, and only opened sessions
// admitted.
const sessionsPolicy = `tenant:
  default: allow
  sessions: {pin_versions: true}
modes:
  voice:
    rules:
      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses in a voice session}
sessions:
  opened_only: true
  default_mode: voice
loop_guard: {enabled: false}
`

// limitsPolicy is the policy of Config.Limits: every call allowed, one
// rate and one budget per agent on every tool, never reached.
const limitsPolicy = `tenant:
  default: allow
limits:
  - id: agent-rate
    key: agent
    rate: {count: 1000000, per: 1s, burst: 1000000}
  - id: agent-budget
    key: agent
    budget: {units: 1000000000, window: 24h}
`

// benchPolicy is the policy of Config.Policy: policytest.FiftyRules for
// the bench caller's agent, allowing echo.
func benchPolicy() (*policy.Policy, error) {
	p, err := policy.Parse([]byte(policytest.FiftyRules(identity.Default.Agent, "echo")))
	if err != nil {
		return nil, fmt.Errorf("bench: policy: %w", err)
	}
	return p, nil
}
