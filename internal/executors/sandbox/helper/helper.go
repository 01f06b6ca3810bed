//go:build linux

package helper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The helper is the worker binary itself, started through /proc/self/exe
// with argv[0] Arg0 and the single environment variable Env=1
// (both must hold). It reads one Config as JSON from fd 3, sets up
// the sandbox and execs the target; anything it writes to fd 4 (close on
// exec) is a set-up failure, or the probe report in probe mode.
const (
	Arg0     = "toolwire-sandbox-helper"
	configFD = 3
	statusFD = 4
)

// ParkedArg is argv[1] of a pooled helper: it writes ReadyByte on its
// status pipe before it reads its config, and TakenByte after.
const (
	ParkedArg = "parked"
	ReadyByte = 'R'
	TakenByte = 'G'
)

// Inside is the uid and gid of the target inside its user namespace.
const Inside = 65534

// Config is the whole helper protocol.
type Config struct {
	// Probe: try every mechanism, write a ProbeReport, exit 0.
	Probe bool `json:"probe,omitempty"`
	// Argv and Env of the target; Argv[0] is an absolute path.
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Dir is the working directory when Tmpfs is false.
	Dir string `json:"dir,omitempty"`
	// Namespaces: the helper is in fresh namespaces and owns its mounts.
	Namespaces bool `json:"namespaces,omitempty"`
	// Proc mounts a fresh /proc.
	Proc bool `json:"proc,omitempty"`
	// Tmpfs mounts a tmpfs of TmpBytes on /tmp, the working directory.
	Tmpfs    bool  `json:"tmpfs,omitempty"`
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
	// Landlock restricts the filesystem to ReadOnly and Writable (plus the
	// working directory); LandlockScope also scopes signals and abstract
	// UNIX sockets.
	Landlock      bool     `json:"landlock,omitempty"`
	LandlockScope bool     `json:"landlock_scope,omitempty"`
	ReadOnly      []string `json:"read_only,omitempty"`
	Writable      []string `json:"writable,omitempty"`
	// Seccomp loads the filter; Network leaves sockets of every family.
	Seccomp bool `json:"seccomp,omitempty"`
	Network bool `json:"network,omitempty"`
	// EgressPorts are the TCP ports a Network target may connect to
	// (Landlock ABI 4); it may bind none.
	EgressPorts []uint16 `json:"egress_ports,omitempty"`
	// EgressGuard installs the egress filter last and sends its listener
	// to the worker on guardFD (egressfilter.go); with it TCP port 53 is
	// allowed too (the guard lets only the resolvers through there).
	// In probe mode the filter is tried instead.
	EgressGuard bool `json:"egress_guard,omitempty"`
	// Rlimits are set last, just before exec.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// NullStdin replaces fd 0 with /dev/null: a pooled helper always has
	// a stdin pipe, which the worker closes for a call without input.
	NullStdin bool `json:"null_stdin,omitempty"`
}

type Rlimit struct {
	Resource int    `json:"r"`
	Value    uint64 `json:"v"`
}

// ProbeReport maps each mechanism tried to "" (works) or its error.
type ProbeReport map[string]string

// IsHelper reports whether this process is a sandbox helper started by
// the sandbox executor. Binaries that may run sandboxed tools call
//
//	if sandbox.IsHelper() {
//		sandbox.RunHelper()
//	}
//
// first thing in main (and TestMain). This package's init does the same,
// so that every binary importing the sandbox — a test binary too — acts as
// a helper when started as one, and never runs its own main (a test binary
// re-executed as a helper would otherwise run its tests again, recursively).
func IsHelper() bool {
	return len(os.Args) > 0 && os.Args[0] == Arg0 && os.Getenv(Env) == "1"
}

func init() {
	if IsHelper() {
		Run()
	}
}

// Run sets up the sandbox described on fd 3 and execs the target.
// It never returns: on any failure it reports on fd 4 and exits 126.
func Run() {
	// Capabilities, no_new_privs and the seccomp filter are per thread:
	// everything below runs on, and execs from, this one thread.
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD)
	hc := readConfig(status)
	report := ProbeReport{}
	step := func(mech string, fn func() error) {
		err := fn()
		if hc.Probe {
			report[mech] = ""
			if err != nil {
				report[mech] = err.Error()
			}
			return
		}
		if err != nil {
			helperFail(status, fmt.Errorf("%s: %w", mech, err))
		}
	}
	dir := hc.Dir
	if hc.Namespaces {
		step(MechUserNS, func() error {
			if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make / private: %w", err)
			}
			if err := unix.Sethostname([]byte("sandbox")); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
			return nil
		})
		if hc.Proc {
			step(MechProc, func() error {
				return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
			})
		}
		if hc.Tmpfs {
			step(MechTmpfs, func() error {
				if err := mountTmp(hc); err != nil {
					return err
				}
				dir = "/tmp"
				return hideRun(hc)
			})
		}
	}
	if !hc.Probe {
		if err := os.Chdir(dir); err != nil {
			helperFail(status, fmt.Errorf("working directory: %w", err))
		}
	}
	if err := dropCapabilities(); err != nil && !hc.Probe {
		helperFail(status, fmt.Errorf("drop capabilities: %w", err))
	}
	if hc.Landlock {
		step(MechLandlock, func() error { return restrictLandlock(hc, dir) })
	}
	if hc.LandlockScope {
		step(MechLandlockScope, func() error {
			if v, _ := llsys.LandlockGetABIVersion(); v < 6 {
				return fmt.Errorf("landlock ABI %d has no scopes (needs 6)", v)
			}
			return landlock.V11.BestEffort().RestrictScoped()
		})
	}
	if hc.Probe {
		step(MechLandlockUnix, func() error {
			if v, _ := llsys.LandlockGetABIVersion(); v < 9 {
				return fmt.Errorf("landlock ABI %d does not restrict connecting to pathname UNIX sockets (needs 9): "+
					"a socket outside /run and /tmp stays reachable when its file permissions allow", v)
			}
			return nil
		})
	}
	filterSteps(hc, step)
	if hc.Probe {
		_ = json.NewEncoder(status).Encode(report)
		os.Exit(0)
	}
	execTarget(status, hc)
}

// readConfig reads the Config from fd 3. A pooled helper (argv[1]
// ParkedArg) first reports that it is ready, then waits there for its
// call, and reports that it took it.
func readConfig(status *os.File) *Config {
	parked := len(os.Args) > 1 && os.Args[1] == ParkedArg
	if parked {
		if _, err := status.Write([]byte{ReadyByte}); err != nil {
			os.Exit(126)
		}
	}
	var hc Config
	in := os.NewFile(configFD, "config")
	err := json.NewDecoder(in).Decode(&hc)
	_ = in.Close()
	if err != nil {
		helperFail(status, fmt.Errorf("read config: %w", err))
	}
	if parked {
		if _, err := status.Write([]byte{TakenByte}); err != nil {
			os.Exit(126)
		}
	}
	if hc.NullStdin {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
		if err == nil {
			err = unix.Dup3(fd, 0, 0)
			_ = unix.Close(fd)
		}
		if err != nil {
			helperFail(status, fmt.Errorf("stdin: %w", err))
		}
	}
	return &hc
}

// filterSteps loads the seccomp filters, the egress guard's last. The
// egress probe's socket is made first, since the filters refuse it when
// the probe has no network.
func filterSteps(hc *Config, step func(string, func() error)) {
	probeSock := -1
	if hc.Probe && hc.EgressGuard {
		probeSock = probeSocket()
	}
	if hc.Seccomp {
		step(MechSeccomp, func() error { return loadSeccomp(hc.Network) })
	}
	if hc.EgressGuard {
		step(GapEgressGuard, func() error {
			if hc.Probe {
				return probeEgressGuard(probeSock)
			}
			return startEgressGuard()
		})
	}
}

// mountTmp mounts the size-limited tmpfs on /tmp. Paths the spec lists
// under /tmp would be hidden by it: each is opened first and bound back
// at the same path inside the new tmpfs (read-only ones read-only).
func mountTmp(hc *Config) error {
	type keep struct {
		path     string
		fd       int
		dir      bool
		readOnly bool
	}
	var keeps []keep
	for i, p := range slices.Concat(hc.ReadOnly, hc.Writable) {
		p = filepath.Clean(p)
		if p == "/tmp" {
			return errors.New("/tmp is the sandbox's own tmpfs and cannot be listed")
		}
		if !strings.HasPrefix(p, "/tmp/") {
			continue
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("path %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("path %s: %w", p, err)
		}
		keeps = append(keeps, keep{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, readOnly: i < len(hc.ReadOnly)})
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=16384,mode=0700,uid=%d,gid=%d", hc.TmpBytes, Inside, Inside)
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return err
	}
	for _, k := range keeps {
		if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
			return fmt.Errorf("path %s: %w", k.path, err)
		}
		if k.dir {
			if err := os.MkdirAll(k.path, 0o755); err != nil {
				return fmt.Errorf("path %s: %w", k.path, err)
			}
		} else if err := os.WriteFile(k.path, nil, 0o644); err != nil {
			return fmt.Errorf("path %s: %w", k.path, err)
		}
		src := "/proc/self/fd/" + strconv.Itoa(k.fd)
		if err := unix.Mount(src, k.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", k.path, err)
		}
		if k.readOnly {
			if err := unix.Mount("", k.path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("read-only %s: %w", k.path, err)
			}
		}
		_ = unix.Close(k.fd)
	}
	// Directories made for the binds are the sandbox's; the root stays
	// private to it.
	return nil
}

// hideRun mounts an empty read-only tmpfs on /run, where daemons keep
// their UNIX sockets (Landlock before ABI 9 does not stop connecting to
// them), unless the tool has network access (resolv.conf often links
// into /run) or a listed path is under /run.
func hideRun(hc *Config) error {
	if hc.Network {
		return nil
	}
	for _, p := range slices.Concat(hc.ReadOnly, hc.Writable) {
		if p = filepath.Clean(p); p == "/run" || strings.HasPrefix(p, "/run/") {
			return nil
		}
	}
	if fi, err := os.Stat("/run"); err != nil || !fi.IsDir() {
		return nil
	}
	return unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=16,mode=0755")
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted
// and effective sets of this thread, so the target runs with none and
// can regain none (no_new_privs is set by the Landlock and seccomp steps,
// and here).
func dropCapabilities() error {
	for c := 0; ; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability
			}
			if errors.Is(err, unix.EPERM) {
				break // no CAP_SETPCAP (no user namespace): nothing to drop
			}
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// systemReadOnly is readable by every target: programs, libraries, the
// dynamic loader's configuration and the user database. Missing entries
// are skipped.
var systemReadOnly = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
	"/dev/urandom", "/dev/random",
}

// networkReadOnly is added for tools with network access: name
// resolution and CA certificates.
var networkReadOnly = []string{
	"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki",
}

// systemWritable are the devices every target may write.
var systemWritable = []string{"/dev/null", "/dev/zero", "/dev/full"}

func restrictLandlock(hc *Config, dir string) error {
	var rules []landlock.Rule
	add := func(paths []string, write, optional bool) error {
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil {
				if optional {
					continue
				}
				return fmt.Errorf("path %s: %w", p, err)
			}
			var r landlock.FSRule
			switch {
			case fi.IsDir() && write:
				r = landlock.RWDirs(p)
			case fi.IsDir():
				r = landlock.RODirs(p)
			case write:
				r = landlock.RWFiles(p)
			default:
				r = landlock.ROFiles(p)
			}
			rules = append(rules, r)
		}
		return nil
	}
	if err := add(systemReadOnly, false, true); err != nil {
		return err
	}
	if err := add(systemWritable, true, true); err != nil {
		return err
	}
	if hc.Network {
		if err := add(networkReadOnly, false, true); err != nil {
			return err
		}
	}
	if hc.Proc {
		if err := add([]string{"/proc"}, false, false); err != nil {
			return err
		}
	}
	if err := add(hc.ReadOnly, false, false); err != nil {
		return err
	}
	if err := add(append([]string{dir}, hc.Writable...), true, false); err != nil {
		return err
	}
	// Rights this ABI cannot restrict are dropped by BestEffort; the probe
	// reports an ABI without Landlock as a gap instead.
	if err := landlock.V11.BestEffort().RestrictPaths(rules...); err != nil {
		return err
	}
	if !hc.Network {
		return landlock.V11.BestEffort().RestrictNet()
	}
	// A network tool: no TCP bind, TCP connect only to the egress ports.
	// UDP is not restricted (V4 has no UDP rights): name resolution needs
	// it, and nothing of toolwire's listens on UDP.
	var netRules []landlock.Rule
	for _, p := range hc.EgressPorts {
		netRules = append(netRules, landlock.ConnectTCP(p))
	}
	if hc.EgressGuard {
		netRules = append(netRules, landlock.ConnectTCP(53)) // DNS over TCP, to the resolvers only
	}
	return landlock.V4.BestEffort().RestrictNet(netRules...)
}

// LandlockNet reports whether the kernel's Landlock restricts TCP ports.
func LandlockNet() bool {
	v, err := llsys.LandlockGetABIVersion()
	return err == nil && v >= 4
}

// execTarget sets the rlimits and execs the target without allocating in
// between (a lowered RLIMIT_DATA must not starve this runtime).
func execTarget(status *os.File, hc *Config) {
	if len(hc.Argv) == 0 {
		helperFail(status, errors.New("no argv"))
	}
	argv0, err := syscall.BytePtrFromString(hc.Argv[0])
	if err != nil {
		helperFail(status, err)
	}
	argv, err := syscall.SlicePtrFromStrings(hc.Argv)
	if err != nil {
		helperFail(status, err)
	}
	envv, err := syscall.SlicePtrFromStrings(hc.Env)
	if err != nil {
		helperFail(status, err)
	}
	lims := make([]unix.Rlimit, len(hc.Rlimits))
	for i, l := range hc.Rlimits {
		lims[i] = unix.Rlimit{Cur: l.Value, Max: l.Value}
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		helperFail(status, fmt.Errorf("pdeathsig: %w", err))
	}
	for i, l := range hc.Rlimits {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.Resource), uintptr(unsafe.Pointer(&lims[i])), 0, 0, 0); errno != 0 {
			helperFail(status, fmt.Errorf("Rlimit %d: %w", l.Resource, errno))
		}
	}
	_, _, errno := syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	helperFail(status, fmt.Errorf("exec %s: %w", hc.Argv[0], errno))
}

func helperFail(status *os.File, err error) {
	_, _ = status.WriteString(err.Error())
	os.Exit(126)
}
