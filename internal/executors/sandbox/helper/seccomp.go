//go:build linux

package helper

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every sandbox: kernel and namespace
// administration, tracing and debugging of other processes, keyrings,
// BPF, perf, and io_uring (which would bypass this filter for socket
// and file operations).
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"setns", "unshare",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup",
	"iopl", "ioperm", "name_to_handle_at", "open_by_handle_at",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"sethostname", "setdomainname", "personality",
}

// actionEPERM makes a matching system call fail with EPERM. (The library's
// ActionErrno alone carries errno 0, which reads as success.)
const actionEPERM = seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))

// actionENOSYS makes clone3 look absent, so libc falls back to clone,
// whose flags the filter can see.
const actionENOSYS = seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))

func seccompPolicy(network bool) seccomp.Policy {
	groups := []seccomp.SyscallGroup{
		{Names: deniedSyscalls, Action: actionEPERM},
		{Names: []string{"clone3"}, Action: actionENOSYS},
		{NamesWithCondtions: []seccomp.NameWithConditions{{Name: "clone", Conditions: []seccomp.Condition{
			{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER},
		}}}, Action: actionEPERM},
	}
	if !network {
		groups = append(groups, seccomp.SyscallGroup{NamesWithCondtions: []seccomp.NameWithConditions{{Name: "socket", Conditions: []seccomp.Condition{
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX},
		}}}, Action: actionEPERM})
	}
	return seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
}

// nativeAudit is the audit architecture of this build; system calls of
// any other architecture (such as i386 through int 0x80 on amd64) are
// refused by a second filter, since the first is written for this one.
var nativeAudit = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}

// loadSeccomp installs the filters on the calling thread (the helper
// locks itself to the thread that execs the target).
func loadSeccomp(network bool) error {
	audit, ok := nativeAudit[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("seccomp: architecture %s not supported", runtime.GOARCH)
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: seccompPolicy(network)}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	archFilter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: audit},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(archFilter)), Filter: &archFilter[0]}
	if _, _, errno := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: architecture filter: %w", errno)
	}
	return nil
}
