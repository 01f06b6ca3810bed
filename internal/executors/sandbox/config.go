package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolwire/toolwire/internal/configvalue"
	"github.com/toolwire/toolwire/internal/egress"
	"github.com/toolwire/toolwire/internal/executors/sandbox/helper"
)

// Mechanism names, as used in Config.Require and IsolationGaps.
const (
	// MechUserNS is the user namespace and with it the pid, net, mount, ipc
	// and uts namespaces (all or none).
	MechUserNS = helper.MechUserNS
	// MechProc is a fresh /proc showing only the sandbox's processes.
	MechProc = helper.MechProc
	// MechTmpfs is the size-limited tmpfs working directory.
	MechTmpfs = helper.MechTmpfs
	// MechLandlock is the Landlock filesystem ruleset.
	MechLandlock = helper.MechLandlock
	// MechLandlockScope is Landlock's IPC scoping (abstract UNIX sockets
	// and signals to processes outside the sandbox; ABI 6).
	MechLandlockScope = helper.MechLandlockScope
	// MechLandlockUnix is Landlock's control of connections to pathname
	// UNIX sockets (ABI 9); without it the sandbox hides /run and /tmp,
	// but a socket elsewhere stays reachable if its permissions allow.
	MechLandlockUnix = helper.MechLandlockUnix
	// MechSeccomp is the seccomp system call filter.
	MechSeccomp = helper.MechSeccomp
	// MechSetuid is running as a uid other than the worker's own.
	MechSetuid = "setuid"
	// MechCgroup is whole-tree memory and process accounting in a cgroup.
	// It is never used (see the package documentation) and always reported.
	MechCgroup = "cgroup"
	// GapHostNetwork is reported for tools with network access: they share
	// the worker's network namespace (see Config.HostNetwork). It is a gap
	// of the tool, not of the host, and cannot be required.
	GapHostNetwork = "host-network"
	// GapLandlockNet is reported for tools with network access when the
	// kernel's Landlock cannot restrict TCP ports (ABI 4): such a tool may
	// connect to any local service.
	GapLandlockNet = "landlock-net"
	// GapEgressGuard is reported for tools with network access when the
	// host cannot run the egress guard (seccomp user notification,
	// pidfd_getfd of Linux 5.6, process_vm_readv of the sandbox's memory,
	// which Yama's ptrace_scope 3 forbids): nothing then stops the tool
	// from reaching loopback, private or metadata addresses on the egress
	// ports. Such tools are refused unless Config.UnguardedEgress.
	GapEgressGuard = helper.GapEgressGuard
)

// DefaultHelperPool and MaxHelperPool are Config.HelperPool's default and
// cap.
const (
	DefaultHelperPool = 4
	MaxHelperPool     = 64
)

// helperEnv is the environment variable (=1) that, with argv[0]
// "toolwire-sandbox-helper", marks a helper process; no tool may set it.
const helperEnv = helper.Env

// Mechanisms lists every mechanism name, for Config.Require.
var Mechanisms = []string{MechUserNS, MechProc, MechTmpfs, MechLandlock, MechLandlockScope, MechLandlockUnix, MechSeccomp, MechSetuid, MechCgroup}

// Config configures an Executor. Its JSON tags let a worker embed it in a
// YAML configuration (sigs.k8s.io/yaml). Limits here are the defaults of
// tools whose spec leaves a SandboxLimits field zero.
type Config struct {
	// WallTime bounds each process in real time; a process still running
	// is killed with its whole namespace and answers TIMEOUT. Default 30s.
	WallTime Duration `json:"wall_time,omitempty"`
	// CPUSeconds is RLIMIT_CPU of each process. Default 30.
	CPUSeconds int64 `json:"cpu_seconds,omitempty"`
	// MemoryBytes is RLIMIT_DATA of each process: its private writable
	// memory (heap, anonymous mappings), not address space reserved but
	// unused (RLIMIT_AS would stop a Go program from starting below about
	// 900 MiB). Default 1 GiB. -1 = unlimited.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Processes is RLIMIT_NPROC, counted per sandbox (each has its own user
	// namespace); threads count. Default 64.
	Processes int64 `json:"processes,omitempty"`
	// OpenFiles is RLIMIT_NOFILE. Default 256.
	OpenFiles int64 `json:"open_files,omitempty"`
	// OutputBytes caps stdout plus stderr; a process writing more is
	// stopped and its stdout kept up to the cap with a truncation marker.
	// Default 1 MiB.
	OutputBytes int64 `json:"output_bytes,omitempty"`
	// TmpBytes is the size of the tmpfs working directory (mounted on /tmp
	// in the sandbox), and RLIMIT_FSIZE. Default 64 MiB.
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
	// StderrTailBytes is how much of the end of stderr error messages
	// carry. Default 2048.
	StderrTailBytes int `json:"stderr_tail_bytes,omitempty"`
	// KillWait bounds the wait for a killed sandbox to be gone. Default 5s.
	KillWait Duration `json:"kill_wait,omitempty"`
	// UID and GID the sandbox runs as on the host when the worker runs as
	// root; a non-root worker's sandbox keeps the worker's ids (reported
	// as the "setuid" gap). Inside the sandbox the process is always uid
	// and gid 65534. Default 65534 (nobody/nogroup).
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// WorkDir is the parent of the per-call working directories used when
	// no tmpfs can be mounted. Default os.TempDir()/toolwire-sandbox.
	WorkDir string `json:"work_dir,omitempty"`
	// ReadOnlyPaths are readable (and executable) by every tool, on top of
	// a built-in system list (/usr, /bin, /lib..., the dynamic loader's
	// configuration, /etc/passwd and /etc/group) and each spec's own.
	// Default none.
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
	// Path is PATH in the sandbox unless a spec's env sets it. Default
	// "/usr/local/bin:/usr/bin:/bin".
	Path string `json:"path,omitempty"`
	// Require names mechanisms (see Mechanisms) that must work on this
	// host: New fails if one is missing. "all" means every one but
	// "cgroup", which is never used and so can never be required. Default
	// none: the executor runs with what the host offers and reports the
	// rest in IsolationGaps.
	Require []string `json:"require,omitempty"`
	// HostNetwork lets tools whose spec sets network: true run. The sandbox
	// cannot give such a tool a network namespace of its own with egress
	// (that needs a user-mode network stack or host routing), so it shares
	// the worker's network namespace, loopback included. Two guards keep
	// it to the internet: the egress guard checks the destination of every
	// connect(2), sendto(2) and sendmsg(2) with the HTTP executor's address
	// rule (package egress: loopback, private, link-local, metadata and
	// other special ranges refused unless in EgressAllowNetworks; ports
	// other than EgressPorts refused, UDP included; the resolvers of
	// /etc/resolv.conf allowed on port 53), and Landlock (ABI 4) allows
	// TCP connect only to EgressPorts (and 53) and no TCP bind. Every
	// response of such a tool carries the "host-network" gap in
	// meta.isolation_gaps, "landlock-net" where Landlock cannot limit
	// ports and "egress-guard" where the egress guard cannot run. Default
	// false: a worker refuses to start with a network tool, and a call of
	// one answers PERMANENT.
	HostNetwork bool `json:"host_network,omitempty"`
	// EgressPorts are the ports network tools may send to, TCP and UDP
	// (see HostNetwork). Default [443, 80].
	EgressPorts []uint16 `json:"egress_ports,omitempty"`
	// EgressAllowNetworks are CIDRs ("10.1.2.0/24", "fd12::/48") network
	// tools may reach on EgressPorts although they are not public, as the
	// HTTP executor's allow_networks: a metadata address stays refused
	// unless listed as the single address (/32, /128). Default none.
	EgressAllowNetworks []string `json:"egress_allow_networks,omitempty"`
	// ResolvConf is the file whose nameserver lines name the resolvers
	// network tools may reach on port 53 whatever their address (a
	// resolver on loopback included), read at each call. Default
	// /etc/resolv.conf, the file the tools themselves read.
	ResolvConf string `json:"resolv_conf,omitempty"`
	// UnguardedEgress lets network tools run on a host whose kernel cannot
	// run the egress guard (before Linux 5.6, seccomp user notification
	// unavailable, or the sandbox's memory not readable by the worker):
	// they then reach every address on EgressPorts, loopback
	// and 169.254.169.254 included, and every response says
	// "egress-guard". Default false: such a worker refuses network tools.
	UnguardedEgress bool `json:"unguarded_egress,omitempty"`
	// HelperPool is how many helpers are kept started ahead, parked in
	// their namespaces until a call of a tool without network access
	// takes one; each runs exactly one call (see the package
	// documentation, "The helper pool"). The pool fills from the first
	// such call, refills in the background, and is stopped by Close.
	// Default 4, at most 64; -1 turns the pool off (every call starts its
	// helper).
	HelperPool int `json:"helper_pool,omitempty"`
	// Logger receives start-up and kill diagnostics. Default slog.Default().
	Logger *slog.Logger `json:"-"`
}

// Duration is a time.Duration written as a Go duration string ("30s") in
// JSON and YAML; see configvalue.Duration.
type Duration = configvalue.Duration

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	c.WallTime = cmp.Or(c.WallTime, Duration(30*time.Second))
	c.CPUSeconds = cmp.Or(c.CPUSeconds, 30)
	c.MemoryBytes = cmp.Or(c.MemoryBytes, 1<<30)
	c.Processes = cmp.Or(c.Processes, 64)
	c.OpenFiles = cmp.Or(c.OpenFiles, 256)
	c.OutputBytes = cmp.Or(c.OutputBytes, 1<<20)
	c.TmpBytes = cmp.Or(c.TmpBytes, 64<<20)
	c.StderrTailBytes = cmp.Or(c.StderrTailBytes, 2048)
	c.KillWait = cmp.Or(c.KillWait, Duration(5*time.Second))
	c.UID = cmp.Or(c.UID, 65534)
	c.GID = cmp.Or(c.GID, 65534)
	c.WorkDir = cmp.Or(c.WorkDir, filepath.Join(os.TempDir(), "toolwire-sandbox"))
	c.Path = cmp.Or(c.Path, "/usr/local/bin:/usr/bin:/bin")
	c.ResolvConf = cmp.Or(c.ResolvConf, "/etc/resolv.conf")
	if c.EgressPorts == nil {
		c.EgressPorts = []uint16{443, 80}
	}
	c.HelperPool = cmp.Or(c.HelperPool, DefaultHelperPool)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate returns an error naming each invalid field. Zero values are
// invalid: validate the result of WithDefaults.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("sandbox config: %s must be positive, got %d", name, v))
		}
	}
	pos("wall_time", int64(c.WallTime))
	pos("cpu_seconds", c.CPUSeconds)
	if c.MemoryBytes != -1 && c.MemoryBytes < 16<<20 {
		errs = append(errs, fmt.Errorf("sandbox config: memory_bytes must be -1 or at least 16 MiB, got %d", c.MemoryBytes))
	}
	pos("processes", c.Processes)
	if c.OpenFiles < 16 {
		errs = append(errs, fmt.Errorf("sandbox config: open_files must be at least 16, got %d", c.OpenFiles))
	}
	pos("output_bytes", c.OutputBytes)
	if c.TmpBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("sandbox config: tmp_bytes must be at least 1 MiB, got %d", c.TmpBytes))
	}
	pos("stderr_tail_bytes", int64(c.StderrTailBytes))
	pos("kill_wait", int64(c.KillWait))
	if c.UID < 0 || c.GID < 0 {
		errs = append(errs, fmt.Errorf("sandbox config: uid and gid must not be negative"))
	}
	if c.UID == 0 || c.GID == 0 {
		errs = append(errs, fmt.Errorf("sandbox config: uid and gid must not be 0 (root)"))
	}
	if !filepath.IsAbs(c.WorkDir) {
		errs = append(errs, fmt.Errorf("sandbox config: work_dir %q must be absolute", c.WorkDir))
	}
	if !filepath.IsAbs(c.ResolvConf) {
		errs = append(errs, fmt.Errorf("sandbox config: resolv_conf %q must be absolute", c.ResolvConf))
	}
	for _, p := range c.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("sandbox config: read_only_paths: %q must be absolute", p))
		}
	}
	for _, n := range c.EgressAllowNetworks {
		if _, err := egress.ParseNetwork(n); err != nil {
			errs = append(errs, fmt.Errorf("sandbox config: egress_allow_networks: %w", err))
		}
	}
	if slices.Contains(c.EgressPorts, 0) {
		errs = append(errs, errors.New("sandbox config: egress_ports: 0 is not a port"))
	}
	if c.HelperPool < -1 || c.HelperPool == 0 || c.HelperPool > MaxHelperPool {
		errs = append(errs, fmt.Errorf("sandbox config: helper_pool must be -1 (off) or 1 to %d, got %d", MaxHelperPool, c.HelperPool))
	}
	for _, r := range c.Require {
		if r != "all" && !slices.Contains(Mechanisms, r) {
			errs = append(errs, fmt.Errorf("sandbox config: require: unknown mechanism %q (known: %v or all)", r, Mechanisms))
		}
	}
	return errors.Join(errs...)
}
