package workerconfig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/skills"
	"github.com/toolwire/toolwire/internal/specfile"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
)

func init() {
	specfile.RegisterCheck(toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, sandbox.CheckSpec)
	specfile.RegisterCheck(toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, httpexec.CheckSpec)
}

// SpecDir is a directory of spec files in a file system (an embedded one
// for built-in examples).
type SpecDir struct {
	FS  fs.FS
	Dir string
}

// Options are what a worker takes from its command line and its binary,
// on top of the File.
type Options struct {
	// Name of the worker instance; default host name and pid.
	Name string
	// PoolTypes, when set, replaces the File's pools with one pool per
	// type (the --pools flag).
	PoolTypes []string
	// Pool names the pools (the --pool flag): the name of a single pool,
	// or the prefix "<Pool>-<type>" of several.
	Pool string
	// Concurrency, AckWait and MaxDeliver apply to pools that do not set
	// their own.
	Concurrency int
	AckWait     time.Duration
	MaxDeliver  int
	// Shadow makes it a shadow worker (replays only).
	Shadow bool
	// Tools are the native tools of the binary.
	Tools []*tool.Tool
	// SpecDirs are more spec directories (the built-in examples).
	SpecDirs []SpecDir
	// Vars add values of ${NAME} in spec files (before the File's own).
	Vars map[string]string
	// BestEffort serves the other pools when an executor cannot start (the
	// dispatcher's default configuration); its calls are answered
	// PERMANENT "not available". Otherwise such a failure stops the worker.
	BestEffort bool
	// Registry writes the registry for the worker (worker.Config.Registry):
	// nil = a request to the dispatchers (registry.Remote); a dispatcher's
	// in-process workers pass its Registrar.
	Registry registry.Writer
	// Logger; default slog.Default().
	Logger *slog.Logger
	// TracerProvider and Metrics observe the worker (see worker.Config);
	// nil = tracing off, metrics unregistered.
	TracerProvider trace.TracerProvider
	Metrics        *telemetry.WorkerMetrics
}

// Worker is a worker built from a configuration: Stop also closes its
// executors (MCP sessions and server processes, sandboxes, HTTP
// connections) through executors.Closer.
type Worker struct {
	*worker.Worker
	// execs are the executors built, in the order built.
	execs []executors.Executor
}

// closeWait bounds closing the executors once the worker has stopped.
const closeWait = 5 * time.Second

// Stop stops the worker (see worker.Worker.Stop), then closes the
// executors. Closing gets its own closeWait, not what is left of ctx: a
// grace period spent on running calls (handed back when it ran out) must
// not turn closing the executors (ending MCP servers' and sandboxes'
// processes) into an error.
func (w *Worker) Stop(ctx context.Context) error {
	err := w.Worker.Stop(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
	defer cancel()
	return errors.Join(err, w.closeExecutors(cctx))
}

// closeExecutors closes the executors, last built first.
func (w *Worker) closeExecutors(ctx context.Context) error {
	var err error
	for _, e := range slices.Backward(w.execs) {
		err = errors.Join(err, executors.Close(ctx, e))
	}
	return err
}

// NewWorker builds (without starting) a worker on b from f and o: its
// executors, its specs (the native tools plus the spec files) and its
// pools. ctx bounds start-up work such as connecting to MCP servers.
func NewWorker(ctx context.Context, b *bus.Bus, f *File, o Options) (_ *Worker, err error) {
	if f == nil {
		f = &File{}
	}
	log := cmp.Or(o.Logger, slog.Default())
	w := &Worker{}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = w.closeExecutors(cctx)
		}
	}()

	if o.Tools, err = f.withSkills(ctx, o); err != nil {
		return nil, err
	}
	nat, err := native.NewWithConfig(native.Config{Logger: log}, o.Tools...)
	if err != nil {
		return nil, err
	}
	fileSpecs, err := f.loadSpecs(o)
	if err != nil {
		return nil, err
	}
	types := f.poolTypes(o, len(o.Tools) > 0, fileSpecs)
	if o.Registry == nil {
		o.Registry = registry.NewRemote(b.NC, b.Config, log).SignWith(b.Signer)
	}
	env := execEnv{b: b, nat: nat, log: log}
	execs := map[toolwirev1.ExecutorType]executors.Executor{}
	var sources []worker.SpecSource
	for _, t := range types {
		if execs[t] != nil {
			continue
		}
		env.writer = registry.PoolWriter{Writer: o.Registry, Pool: f.pool(t, o, len(types) > 1).PoolConfig.WithDefaults().Name, Type: t,
			Worker: o.Name, Signer: b.Signer.Public()}
		exec, src, err := f.executor(ctx, env, t)
		if err != nil {
			if !o.BestEffort {
				return nil, err
			}
			log.Warn("executor not available; its calls are answered PERMANENT", "executor", bus.TypeToken(t), "err", err)
			exec = Unavailable(t, err.Error())
		}
		execs[t] = exec
		w.execs = append(w.execs, exec)
		if src != nil {
			sources = append(sources, src)
		}
	}
	// The binary's native tools are published only by a worker that runs
	// them: registered without a native pool, their calls would be
	// admitted and never delivered.
	var specs []*toolwirev1.ToolSpec
	if execs[toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE] != nil {
		specs = nat.Specs()
	} else if len(o.Tools) > 0 {
		log.Info("native tools not published: this worker serves no native pool", "tools", len(o.Tools))
	}
	var skipped []string
	for _, s := range fileSpecs {
		exec := execs[s.Executor]
		if exec == nil && len(o.PoolTypes) > 0 && o.BestEffort {
			// The built-in default configuration with its pools narrowed
			// (the dispatcher's --workers): its other types' tools are
			// another worker's, as the native tools are above. A tool of
			// the operator's own file is never dropped: that is an error
			// below, as it was.
			skipped = append(skipped, s.Name)
			continue
		}
		if exec == nil {
			return nil, fmt.Errorf("workerconfig: tool %q is a %s tool, but no %s pool is served", s.Name, bus.TypeToken(s.Executor), bus.TypeToken(s.Executor))
		}
		// Checks that need the executor's settings (the HTTP executor's
		// allowlists and SSRF guard against the URL template).
		if c, ok := exec.(interface {
			CheckSpec(*toolwirev1.ToolSpec) error
		}); ok {
			if err := c.CheckSpec(s); err != nil {
				return nil, fmt.Errorf("workerconfig: tool %q: %w", s.Name, err)
			}
		}
		specs = append(specs, s)
	}
	if len(skipped) > 0 {
		log.Info("spec-file tools not published: this worker serves no pool of their type", "tools", skipped, "pools", o.PoolTypes)
	}
	var pools []worker.Pool
	for _, t := range types {
		pools = append(pools, f.pool(t, o, len(types) > 1))
	}
	ww, err := worker.New(b, worker.Config{Name: o.Name, Pools: pools, Executors: execs, Specs: specs,
		SpecSources: sources, Shadow: o.Shadow, Registry: o.Registry, Logger: log, TracerProvider: o.TracerProvider, Metrics: o.Metrics})
	if err != nil {
		return nil, err
	}
	w.Worker = ww
	return w, nil
}

// withSkills returns the native tools o.Tools with the `skill` tool of
// the File's skill directories added (o.Tools itself when there are
// none). Skills without a native pool are an error, BestEffort or not:
// `skill` is a native tool, published only with a native pool, so they
// would be loaded and silently not served.
func (f *File) withSkills(ctx context.Context, o Options) ([]*tool.Tool, error) {
	tools := o.Tools
	if len(f.Skills) == 0 {
		return tools, nil
	}
	if !slices.Contains(f.poolTypes(o, true, nil), toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE) {
		return nil, errors.New("workerconfig: skills are served by the native tool skill, but this worker serves no native pool")
	}
	dirs := make([]string, 0, len(f.Skills))
	for _, d := range f.Skills {
		if !filepath.IsAbs(d) {
			d = filepath.Join(f.dir, d)
		}
		dirs = append(dirs, d)
	}
	set, err := skills.Load(ctx, dirs)
	if err != nil {
		return nil, fmt.Errorf("workerconfig: %w", err)
	}
	t, err := skills.Tool(set)
	if err != nil {
		return nil, fmt.Errorf("workerconfig: skills: %w", err)
	}
	return append(slices.Clip(tools), t), nil
}

// poolTypes are the types served: the flags', the File's, or every type
// with something to serve.
func (f *File) poolTypes(o Options, hasNative bool, specs []*toolwirev1.ToolSpec) []toolwirev1.ExecutorType {
	var names []string
	switch {
	case len(o.PoolTypes) > 0:
		names = o.PoolTypes
	case len(f.Pools) > 0:
		for _, p := range f.Pools {
			names = append(names, p.Type)
		}
	default:
		if hasNative {
			names = append(names, "native")
		}
		for _, s := range specs {
			names = append(names, bus.TypeToken(s.Executor))
		}
		if len(f.MCP.Servers) > 0 {
			names = append(names, "mcp")
		}
		if len(names) == 0 {
			names = []string{"native"}
		}
	}
	var types []toolwirev1.ExecutorType
	for _, n := range names {
		if t, ok := bus.ParseType(strings.TrimSpace(n)); ok && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types
}

// pool is the pool of type t: the File's settings, then the flags'.
func (f *File) pool(t toolwirev1.ExecutorType, o Options, several bool) worker.Pool {
	var pf PoolFile
	for _, p := range f.Pools {
		if pt, _ := bus.ParseType(p.Type); pt == t {
			pf = p
		}
	}
	name := pf.Name
	if name == "" && o.Pool != "" {
		name = o.Pool
		if several {
			name += "-" + bus.TypeToken(t)
		}
	}
	conc := cmp.Or(pf.Concurrency, o.Concurrency)
	if conc == 0 && t == toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX {
		conc = 2 * runtime.NumCPU() // processes, not goroutines
	}
	return worker.Pool{Concurrency: conc, PoolConfig: bus.PoolConfig{Name: name, Type: t,
		AckWait: cmp.Or(time.Duration(pf.AckWait), o.AckWait), MaxDeliver: cmp.Or(pf.MaxDeliver, o.MaxDeliver)}}
}

// execEnv is what executor builds executors with: the bus, the native
// executor, the logger, and the registry writer of the pool of the type
// built.
type execEnv struct {
	b      *bus.Bus
	nat    *native.Executor
	log    *slog.Logger
	writer registry.PoolWriter
}

// executor builds the executor of type t (closed by Worker.Stop if it is
// an executors.Closer).
func (f *File) executor(ctx context.Context, env execEnv, t toolwirev1.ExecutorType) (executors.Executor, worker.SpecSource, error) {
	b, nat, log := env.b, env.nat, env.log
	switch t {
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE:
		return nat, nil, nil
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX:
		cfg := f.Sandbox
		cfg.Logger = log
		e, err := sandbox.New(cfg)
		if err != nil {
			return nil, nil, err
		}
		return e, nil, nil
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP:
		cfg := f.HTTP
		cfg.Logger = log
		e, err := httpexec.New(cfg)
		if err != nil {
			return nil, nil, err
		}
		return e, nil, nil
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP:
		if len(f.MCP.Servers) == 0 {
			return nil, nil, errors.New("mcp: no servers configured (mcp.servers)")
		}
		e, err := mcp.New(ctx, f.MCP, mcp.Options{Registry: b.Registry, Conn: b.NC, Writer: env.writer, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return e, e, nil
	}
	return nil, nil, fmt.Errorf("workerconfig: no executor for %s", t)
}

// loadSpecs loads the File's spec files and o's spec directories.
func (f *File) loadSpecs(o Options) ([]*toolwirev1.ToolSpec, error) {
	vars := map[string]string{}
	for k, v := range o.Vars {
		vars[k] = v
	}
	for k, v := range f.Vars {
		vars[k] = v
	}
	so := specfile.Options{Vars: vars, Lookup: lookupToolwireEnv}
	var specs []*toolwirev1.ToolSpec
	var errs []error
	add := func(got []*toolwirev1.ToolSpec, err error) {
		specs = append(specs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range o.SpecDirs {
		add(specfile.LoadDir(d.FS, d.Dir, so))
	}
	for _, p := range f.Tools {
		if !filepath.IsAbs(p) {
			p = filepath.Join(f.dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("workerconfig: tools: %w", err))
			continue
		}
		if fi.IsDir() {
			add(specfile.LoadDir(os.DirFS(p), ".", so))
			continue
		}
		spec, err := specfile.Load(os.DirFS(filepath.Dir(p)), filepath.Base(p), so)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		specs = append(specs, spec)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("workerconfig: tool %q is declared twice", s.Name))
		}
		seen[s.Name] = true
	}
	return specs, errors.Join(errs...)
}

// lookupToolwireEnv gives spec files the TOOLWIRE_VAR_* environment
// variables only: a spec is published to the registry for every caller to
// read, so no other variable (a token, TOOLWIRE_API_KEY) may be one typo
// away from it. Secrets belong in secret_headers, resolved per call and
// never published.
func lookupToolwireEnv(name string) (string, bool) {
	if !strings.HasPrefix(name, "TOOLWIRE_VAR_") {
		return "", false
	}
	return os.LookupEnv(name)
}

// Unavailable is the executor of a type this worker cannot run: every
// call is answered PERMANENT with reason, never left queued.
func Unavailable(t toolwirev1.ExecutorType, reason string) executors.Executor {
	return executors.Func(func(context.Context, *executors.Request) (*tool.Result, error) {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT,
			Message:     fmt.Sprintf("executor type %s is not available in this worker: %s", bus.TypeToken(t), reason),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	})
}
