//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/egress"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The worker's owner closes an Executor through executors.Closer.
var _ executors.Closer = (*Executor)(nil)

// Executor runs sandbox tools. It is safe for concurrent use.
type Executor struct {
	cfg Config
	log *slog.Logger

	hostUID, hostGID int
	userns           bool        // namespaces work
	works            probeReport // mechanism -> "" or why not
	gaps             []string
	guard            *egress.Guard // the egress guard's rule for network tools
	pool             *pool         // parked helpers; nil when off or without namespaces

	mu      sync.Mutex
	closed  bool
	running map[*os.Process]struct{}
	waiters sync.WaitGroup // process waits that outlived a bounded kill

	// tookHelper, when set (by a test, before any call), runs after a
	// call has taken a parked helper and before it sends the helper its
	// call (export_test.go).
	tookHelper func(p *proc)
}

var (
	_ executors.Executor = (*Executor)(nil)
	_ executors.Isolated = (*Executor)(nil)
)

// New returns an Executor after probing which isolation mechanisms work
// on this host (by starting one helper in probe mode). It returns an
// error for an invalid cfg, when no helper can be started at all, or when
// a mechanism named in cfg.Require is missing.
func New(cfg Config) (*Executor, error) {
	return newExecutor(cfg, false)
}

// newExecutor is New; noUserNS skips namespaces as if the host had none
// (the tests' way to exercise the weaker path).
func newExecutor(cfg Config, noUserNS bool) (*Executor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Executor{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "executor", "executor", "sandbox"),
		hostUID: os.Getuid(),
		hostGID: os.Getgid(),
		running: map[*os.Process]struct{}{},
	}
	if os.Geteuid() == 0 {
		e.hostUID, e.hostGID = cfg.UID, cfg.GID
	}
	var nets []netip.Prefix
	for _, n := range cfg.EgressAllowNetworks {
		p, _ := egress.ParseNetwork(n) // Validate refused every invalid one
		nets = append(nets, p)
	}
	e.guard = egress.New(cfg.EgressPorts, nets)
	if err := e.probe(noUserNS); err != nil {
		return nil, err
	}
	if e.userns && cfg.HelperPool > 0 {
		e.pool = newPool(e, cfg.HelperPool)
	}
	var missing []string
	for _, r := range cfg.Require {
		if r == "all" {
			for _, g := range e.gaps {
				if g != MechCgroup {
					missing = append(missing, g)
				}
			}
		} else if slices.Contains(e.gaps, r) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("sandbox: required isolation missing on this host: %s (%s)",
			strings.Join(slices.Compact(missing), ", "), e.explain(missing))
	}
	if len(e.gaps) > 0 {
		e.log.Warn("sandbox isolation is weaker on this host", "gaps", e.gaps, "why", e.explain(e.gaps))
	}
	return e, nil
}

func (e *Executor) explain(mechs []string) string {
	var parts []string
	for _, m := range slices.Compact(slices.Sorted(slices.Values(mechs))) {
		if why := e.works[m]; why != "" {
			parts = append(parts, m+": "+why)
		}
	}
	return strings.Join(parts, "; ")
}

// IsolationGaps names each mechanism this host lacks (see Mechanisms);
// "cgroup" is always among them since cgroups are not used. The worker
// logs them at start and copies them into every response's meta.
func (e *Executor) IsolationGaps() []string { return slices.Clone(e.gaps) }

// errNetworkNotAllowed refuses a network tool on a worker whose operator
// has not accepted that it shares the worker's network (HostNetwork).
var errNetworkNotAllowed = errors.New("sandbox: the tool asks for network access, which shares the worker's network " +
	"namespace (its loopback included); this worker's sandbox config does not allow it (set sandbox.host_network: true " +
	"to accept that, with TCP limited to sandbox.egress_ports)")

// errEgressUnguarded refuses a network tool on a host where the egress
// guard cannot run, unless the operator accepted that (UnguardedEgress).
var errEgressUnguarded = errors.New("sandbox: the tool asks for network access, and this host's kernel cannot run the " +
	"egress guard (seccomp user notification and pidfd_getfd, Linux 5.6), which keeps such tools from loopback, private and " +
	"cloud metadata addresses; set sandbox.unguarded_egress: true to accept that")

// CheckSpec validates spec as the package's CheckSpec does, and refuses a
// tool with network access unless Config.HostNetwork allows it, and, on
// a host without the egress guard, Config.UnguardedEgress too. Workers
// call it at start-up for every sandbox tool they serve.
func (e *Executor) CheckSpec(spec *toolwirev1.ToolSpec) error {
	if err := CheckSpec(spec); err != nil {
		return err
	}
	return e.checkNetwork(spec.GetSandbox())
}

// checkNetwork refuses a network tool this worker's operator has not
// accepted.
func (e *Executor) checkNetwork(sc *toolwirev1.SandboxConfig) error {
	switch {
	case !sc.GetNetwork():
		return nil
	case !e.cfg.HostNetwork:
		return errNetworkNotAllowed
	case !e.egressGuard() && !e.cfg.UnguardedEgress:
		return errEgressUnguarded
	}
	return nil
}

// egressGuard reports whether the probe found the egress guard working.
func (e *Executor) egressGuard() bool { return e.works[GapEgressGuard] == "" }

// SpecIsolationGaps names the gaps of one tool on top of IsolationGaps:
// "host-network" for a tool with network access, "landlock-net" when
// the kernel cannot then limit its TCP ports, and "egress-guard" when it
// cannot check its destinations.
func (e *Executor) SpecIsolationGaps(spec *toolwirev1.ToolSpec) []string {
	if !spec.GetSandbox().GetNetwork() {
		return nil
	}
	gaps := []string{GapHostNetwork}
	if e.works[MechLandlock] != "" || !landlockNet() {
		gaps = append(gaps, GapLandlockNet)
	}
	if !e.egressGuard() {
		gaps = append(gaps, GapEgressGuard)
	}
	return gaps
}

// probe starts a helper that tries every mechanism, first in namespaces,
// then (if those cannot be created) without.
func (e *Executor) probe(noUserNS bool) error {
	hc := &helperConfig{Probe: true, Dir: os.TempDir(), Namespaces: true, Proc: true, Tmpfs: true, TmpBytes: 1 << 20,
		Landlock: true, LandlockScope: true, Seccomp: true, EgressGuard: true}
	e.userns = !noUserNS
	rep, nsErr := probeReport(nil), errors.New("disabled")
	if e.userns {
		rep, nsErr = e.runProbe(hc)
	}
	if nsErr != nil {
		e.userns = false
		hc.Namespaces, hc.Proc, hc.Tmpfs = false, false, false
		var err error
		if rep, err = e.runProbe(hc); err != nil {
			return fmt.Errorf("sandbox: cannot start the helper (%w) even without namespaces (%w)", nsErr, err)
		}
		rep[MechUserNS] = "no pid, net, mount, ipc or uts isolation: user namespaces cannot be created here: " + nsErr.Error()
		rep[MechProc] = "needs a user namespace"
		rep[MechTmpfs] = "needs a user namespace; the working directory is on disk, bounded per file by RLIMIT_FSIZE"
	}
	rep[MechCgroup] = "not used: memory is bounded per process (RLIMIT_DATA), processes per sandbox (RLIMIT_NPROC in its user namespace)"
	if os.Geteuid() != 0 {
		rep[MechSetuid] = "the worker is not root: the sandbox runs as the worker's own uid on the host"
	} else {
		rep[MechSetuid] = ""
	}
	e.works = rep
	for _, m := range Mechanisms {
		if rep[m] != "" {
			e.gaps = append(e.gaps, m)
		}
	}
	return nil
}

func (e *Executor) runProbe(hc *helperConfig) (probeReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer lockForChild()()
	p, err := e.start(hc, nil) // with the egress guard's supervisor, which the probe's round trip needs
	if err != nil {
		return nil, err
	}
	if p.guard != nil {
		defer p.guard.stop()
	}
	out, _ := io.ReadAll(p.status)
	_ = p.status.Close()
	_, _ = io.Copy(io.Discard, p.stdout)
	_, _ = io.Copy(io.Discard, p.stderr)
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	state, werr := p.wait(ctx, e)
	if werr != nil {
		return nil, werr
	}
	var rep probeReport
	if err := json.Unmarshal(out, &rep); err != nil || !state.Success() {
		return nil, fmt.Errorf("helper probe failed (%s): %s", state, bytes.TrimSpace(out))
	}
	return rep, nil
}

// proc is one started helper.
type proc struct {
	cmd            *exec.Cmd
	config         *os.File // write end: the helperConfig
	status         *os.File // read end: set-up errors
	stdout, stderr *os.File // read ends
	stdin          *os.File // write end, nil without input
	done           chan struct{}
	state          *os.ProcessState
	guard          *egressSupervisor // a network tool's, nil without the egress guard
	parked         bool              // started by the pool (parkedArg)
	handed         bool              // taken from the pool by a call (pool.mu)
}

// lockForChild locks the calling goroutine to its thread and returns the
// unlock. The helper's parent-death signal (SIGKILL, so a sandbox dies
// with its worker) is sent when the *thread* that forked it ends, not the
// process (go.dev/issue/27505), and the Go runtime ends a thread whenever
// a goroutine ends while locked to it: a Go tool of the same worker that
// does so would kill the sandboxes forked from that thread mid-call. So a
// helper is forked on a thread locked to the goroutine that waits for it,
// until it is gone: one parked thread per running sandbox.
func lockForChild() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// start spawns the helper of a call and, for a network tool with the
// egress guard, starts the supervisor that answers its filter.
func (e *Executor) start(hc *helperConfig, stdin []byte) (*proc, error) {
	if !hc.EgressGuard {
		return e.spawn(hc, stdin, nil)
	}
	helperEnd, sup, err := e.newEgressGuard(e.log)
	if err != nil {
		return nil, err
	}
	p, err := e.spawn(hc, stdin, helperEnd)
	_ = helperEnd.Close() // the helper has its copy; its exit ends the supervisor's wait
	if err != nil {
		sup.close()
		return nil, err
	}
	p.guard = sup
	e.waiters.Go(sup.run)
	return p, nil
}

// spawn starts a helper with hc on its config pipe and stdin (nil = no
// input), and guard (the helper's end of the egress guard's socket pair)
// as fd 5 unless nil. The caller reads the pipes and calls wait.
func (e *Executor) spawn(hc *helperConfig, stdin []byte, guard *os.File) (*proc, error) {
	p, err := e.launch(launchOpts{network: hc.Network, stdin: stdin != nil, guard: guard})
	if err != nil {
		return nil, err
	}
	e.send(p, hc, stdin)
	return p, nil
}

// launchOpts say how to start a helper.
type launchOpts struct {
	network bool     // no network namespace
	stdin   bool     // a pipe on fd 0 (else /dev/null)
	guard   *os.File // fd 5 unless nil
	parked  bool     // a pooled helper: reports ready, then waits for its call
}

// launch starts a helper that waits for its config on p.config. The
// caller must be on a thread locked until the helper is reaped.
func (e *Executor) launch(o launchOpts) (*proc, error) {
	var closers []*os.File // the child's ends, and ours on failure
	defer func() {
		for _, f := range closers {
			_ = f.Close()
		}
	}()
	pipes := make([][2]*os.File, 0, 5) // config, status, stdout, stderr, stdin
	for range 4 + btoi(o.stdin) {
		r, w, err := os.Pipe()
		if err != nil {
			for _, pp := range pipes {
				closers = append(closers, pp[0], pp[1])
			}
			return nil, fmt.Errorf("sandbox: pipe: %w", err)
		}
		pipes = append(pipes, [2]*os.File{r, w})
	}
	p := &proc{config: pipes[0][1], status: pipes[1][0], stdout: pipes[2][0], stderr: pipes[3][0], done: make(chan struct{}), parked: o.parked}
	closers = append(closers, pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1])
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{helperArg0},
		Env:         []string{helperEnv + "=1"},
		Dir:         "/",
		Stdout:      pipes[2][1],
		Stderr:      pipes[3][1],
		ExtraFiles:  []*os.File{pipes[0][0], pipes[1][1]},
		SysProcAttr: e.sysProcAttr(o.network),
	}
	if o.parked {
		cmd.Args = append(cmd.Args, parkedArg)
	}
	if o.guard != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, o.guard)
	}
	if o.stdin {
		cmd.Stdin, p.stdin = pipes[4][0], pipes[4][1]
		closers = append(closers, pipes[4][0])
	}
	if err := cmd.Start(); err != nil {
		p.closeAll()
		return nil, fmt.Errorf("sandbox: start helper: %w", err)
	}
	p.cmd = cmd
	e.mu.Lock()
	e.running[cmd.Process] = struct{}{}
	closed := e.closed
	e.mu.Unlock()
	e.waiters.Go(func() {
		defer close(p.done)
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		e.mu.Lock()
		delete(e.running, cmd.Process)
		e.mu.Unlock()
	})
	if closed {
		e.kill(cmd.Process)
	}
	return p, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// send writes hc to the helper's config pipe, then stdin (nil = none: a
// pooled helper's pipe is closed, and hc must say NullStdin).
func (e *Executor) send(p *proc, hc *helperConfig, stdin []byte) {
	// Config, then stdin; the helper reads its config before anything
	// else, and a pipe holds 64 KiB, so a goroutine writes larger stdin.
	b, _ := json.Marshal(hc)
	if _, err := p.config.Write(b); err != nil {
		e.log.Debug("sandbox: write helper config", "err", err)
	}
	_ = p.config.Close()
	if p.stdin == nil {
		return
	}
	if stdin == nil {
		_ = p.stdin.Close()
		p.stdin = nil
		return
	}
	inW := p.stdin
	e.waiters.Go(func() {
		// EPIPE when the target does not read it all; ErrClosed when
		// drain closed it because the target is gone (a daemon of a
		// sandbox without a pid namespace may hold the read end).
		_, _ = inW.Write(stdin)
		_ = inW.Close()
	})
}

func (e *Executor) sysProcAttr(network bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	root := os.Geteuid() == 0
	if e.userns {
		flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
		if !network {
			flags |= syscall.CLONE_NEWNET
		}
		a.Cloneflags = flags
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: inside, HostID: e.hostUID, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: inside, HostID: e.hostGID, Size: 1}}
		// A root parent may allow setgroups, so the helper drops root's
		// supplementary groups; an unprivileged parent must deny it.
		a.GidMappingsEnableSetgroups = root
		a.Credential = &syscall.Credential{Uid: inside, Gid: inside, Groups: []uint32{}}
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	} else if root {
		a.Credential = &syscall.Credential{Uid: uint32(e.hostUID), Gid: uint32(e.hostGID), Groups: []uint32{}}
	}
	return a
}

// kill stops a helper or target and, with it, everything in its pid
// namespace (or, without one, its process group).
func (e *Executor) kill(p *os.Process) {
	_ = p.Kill()
	if !e.userns {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
}

// wait waits for the process, killing it when ctx ends; the wait after a
// kill is bounded by KillWait.
func (p *proc) wait(ctx context.Context, e *Executor) (*os.ProcessState, error) {
	select {
	case <-p.done:
		return p.state, nil
	case <-ctx.Done():
	}
	e.kill(p.cmd.Process)
	select {
	case <-p.done:
		return p.state, nil
	case <-time.After(time.Duration(e.cfg.KillWait)):
		e.log.Error("sandbox: a killed process is still not gone", "pid", p.cmd.Process.Pid, "waited", time.Duration(e.cfg.KillWait))
		return nil, fmt.Errorf("sandbox: process %d not gone %s after SIGKILL", p.cmd.Process.Pid, time.Duration(e.cfg.KillWait))
	}
}

// Close kills every running sandbox and waits, up to ctx, for all of them
// to be gone. Execute fails after Close.
func (e *Executor) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	for p := range e.running {
		e.kill(p)
	}
	e.mu.Unlock()
	e.pool.close()
	done := make(chan struct{})
	go func() {
		e.waiters.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox: close: %w", ctx.Err())
	}
}

// limits are the effective limits of one call.
type limits struct {
	wall                                                time.Duration
	cpu, memory, processes, openFiles, output, fileSize int64
}

func (e *Executor) limits(l *toolwirev1.SandboxLimits) limits {
	pick := func(v, def int64) int64 {
		if v != 0 {
			return v
		}
		return def
	}
	wall := l.GetWallTime().AsDuration()
	if wall <= 0 {
		wall = time.Duration(e.cfg.WallTime)
	}
	return limits{
		wall:      wall,
		cpu:       pick(l.GetCpuSeconds(), e.cfg.CPUSeconds),
		memory:    pick(l.GetMemoryBytes(), e.cfg.MemoryBytes),
		processes: pick(l.GetProcesses(), e.cfg.Processes),
		openFiles: pick(l.GetOpenFiles(), e.cfg.OpenFiles),
		output:    pick(l.GetOutputBytes(), e.cfg.OutputBytes),
		fileSize:  e.cfg.TmpBytes,
	}
}

func (l limits) rlimits() []rlimit {
	r := []rlimit{
		{Resource: unix.RLIMIT_CPU, Value: uint64(l.cpu)},
		{Resource: unix.RLIMIT_NPROC, Value: uint64(l.processes)},
		{Resource: unix.RLIMIT_NOFILE, Value: uint64(l.openFiles)},
		{Resource: unix.RLIMIT_FSIZE, Value: uint64(l.fileSize)},
		{Resource: unix.RLIMIT_CORE, Value: 0},
	}
	if l.memory > 0 {
		r = append(r, rlimit{Resource: unix.RLIMIT_DATA, Value: uint64(l.memory)})
	}
	return r
}

// environ builds the target's environment: fixed values, then allowed
// variables from the worker, then PATH, HOME and TMPDIR unless set.
func (e *Executor) environ(sc *toolwirev1.SandboxConfig, dir string) []string {
	env := map[string]string{}
	for _, n := range sc.GetEnvAllow() {
		if v, ok := os.LookupEnv(n); ok && n != helperEnv {
			env[n] = v
		}
	}
	for k, v := range sc.GetEnv() {
		if k != helperEnv {
			env[k] = v
		}
	}
	for k, v := range map[string]string{"PATH": e.cfg.Path, "HOME": dir, "TMPDIR": dir} {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !strings.ContainsRune(k, '=') && !strings.ContainsRune(k+env[k], 0) {
			out = append(out, k+"="+env[k])
		}
	}
	return out
}

// Execute runs the call's process in a fresh sandbox and maps its outcome.
//
// Errors: VALIDATION (no side effects) for arguments that cannot be
// substituted (objects, arrays, option-looking values, NUL bytes);
// PERMANENT for a spec without a usable sandbox config, a non-zero exit
// (with the stderr tail) or a limit that killed the process (the message
// names it); the mapped type for exit codes in exit_codes; TIMEOUT for the
// wall time limit; INTERNAL for a crash by another signal or a sandbox
// that could not be set up; and ctx's error (deadline → TIMEOUT, cancel →
// CANCELLED through tool.AsError) when ctx ends first, after the process
// and everything it started are gone.
func (e *Executor) Execute(ctx context.Context, req *executors.Request) (*tool.Result, error) {
	sc := req.Spec.GetSandbox()
	if err := e.checkNetwork(sc); err != nil {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: err.Error(),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	tmpl, err := parseTemplate(sc)
	if err != nil {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "sandbox spec: " + err.Error(),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(req.Call.GetArguments(), &args); err != nil || args == nil {
		return nil, tool.InvalidArgument("", "arguments must be a JSON object")
	}
	argv, stdin, err := tmpl.build(args)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: "sandbox executor is closed", Retryable: true,
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	lim := e.limits(sc.GetLimits())
	hc := &helperConfig{
		Argv: argv, Namespaces: e.userns,
		Proc: e.works[MechProc] == "", Tmpfs: e.works[MechTmpfs] == "", TmpBytes: e.cfg.TmpBytes,
		Landlock: e.works[MechLandlock] == "", LandlockScope: e.works[MechLandlockScope] == "",
		ReadOnly: slices.Concat(e.cfg.ReadOnlyPaths, sc.GetReadOnlyPaths()), Writable: sc.GetWritablePaths(),
		Seccomp: e.works[MechSeccomp] == "", Network: sc.GetNetwork(),
		Rlimits: lim.rlimits(),
	}
	if hc.Network {
		hc.EgressPorts = e.cfg.EgressPorts
		hc.EgressGuard = e.egressGuard()
	}
	dir := "/tmp"
	if !hc.Tmpfs {
		if dir, err = e.workDir(); err != nil {
			return nil, err
		}
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				e.log.Warn("sandbox: remove working directory", "dir", dir, "err", err)
			}
		}()
		hc.Dir = dir
	}
	hc.Env = e.environ(sc, dir)
	return e.run(ctx, sc, hc, lim, stdin)
}

// workDir makes a fresh per-call directory owned by the sandbox's uid.
func (e *Executor) workDir() (string, error) {
	if err := os.MkdirAll(e.cfg.WorkDir, 0o711); err != nil {
		return "", fmt.Errorf("sandbox: working directory: %w", err)
	}
	dir, err := os.MkdirTemp(e.cfg.WorkDir, "call-")
	if err != nil {
		return "", fmt.Errorf("sandbox: working directory: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, e.hostUID, e.hostGID); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("sandbox: working directory: %w", err)
		}
	}
	return dir, nil
}

// stopReason says why the executor killed a process.
type stopReason int

const (
	notStopped stopReason = iota
	stoppedCtx
	stoppedWall
	stoppedOutput
)

func (e *Executor) run(ctx context.Context, sc *toolwirev1.SandboxConfig, hc *helperConfig, lim limits, stdin []byte) (*tool.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: not started: %w", err)
	}
	if p := e.pool.take(hc); p != nil {
		if e.tookHelper != nil {
			e.tookHelper(p)
		}
		// Its owner's thread, locked until it is reaped, forked it.
		phc := *hc
		phc.NullStdin = stdin == nil
		e.send(p, &phc, stdin)
		res, err := e.supervise(ctx, sc, lim, p)
		if !errors.Is(err, errHelperLost) {
			return res, err
		}
		e.log.Warn("sandbox: a parked helper ended before its call; starting a fresh one", "pid", p.cmd.Process.Pid)
	}
	defer lockForChild()()
	p, err := e.start(hc, stdin)
	if err != nil {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: err.Error(), Cause: err,
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	return e.supervise(ctx, sc, lim, p)
}

// supervise waits for a started helper and its target, enforcing the
// wall time, output cap and ctx, and maps the outcome. A pooled helper
// that ended before it took its call is errHelperLost.
func (e *Executor) supervise(ctx context.Context, sc *toolwirev1.SandboxConfig, lim limits, p *proc) (*tool.Result, error) {
	if p.guard != nil {
		// Stopped once the process is gone (or killed), on every return.
		defer p.guard.stop()
	}
	out := newOutputs(lim.output, e.cfg.StderrTailBytes)
	out.start(p.stdout, p.stderr)
	var setup bytes.Buffer
	statusDone := make(chan struct{})
	e.waiters.Go(func() {
		defer close(statusDone)
		_, _ = io.Copy(&setup, io.LimitReader(p.status, 64<<10))
	})
	wall := time.NewTimer(lim.wall)
	defer wall.Stop()
	reason := notStopped
	select {
	case <-p.done:
	case <-ctx.Done():
		reason = stoppedCtx
	case <-wall.C:
		reason = stoppedWall
	case <-out.over:
		reason = stoppedOutput
	}
	state, werr := p.state, error(nil)
	if reason != notStopped {
		state, werr = p.wait(doneCtx, e) // kill now, wait bounded
	}
	// The whole pid namespace is gone with its init, so the pipes are at
	// EOF; without a pid namespace a daemon may still hold them: close
	// them after a short grace.
	e.drain(p, out, statusDone)
	if p.parked {
		if bytes.HasPrefix(setup.Bytes(), []byte{takenByte}) {
			setup.Next(1)
		} else if reason == notStopped && werr == nil {
			return nil, errHelperLost
		}
	}
	if werr != nil {
		if reason == stoppedCtx {
			return nil, fmt.Errorf("sandbox: %w (and %w)", ctx.Err(), werr)
		}
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: werr.Error(), Cause: werr}
	}
	if reason == stoppedCtx {
		return nil, fmt.Errorf("sandbox: process killed: %w", ctx.Err())
	}
	if setup.Len() > 0 {
		return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message:     "sandbox set-up failed: " + setup.String(),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
	}
	return e.outcome(sc, lim, reason, state, out)
}

// doneCtx is an already cancelled context: wait with it kills at once.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (e *Executor) drain(p *proc, out *outputs, statusDone <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		out.done.Wait()
		<-statusDone
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		if !e.userns {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		_ = p.stdout.Close()
		_ = p.stderr.Close()
		_ = p.status.Close()
		<-done
	}
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	_ = p.status.Close()
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
}
