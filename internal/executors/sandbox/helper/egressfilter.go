//go:build linux

package helper

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The egress filter is a seccomp filter with a listener (user
// notification): connect(2) and sendto(2) with a destination address of
// 16 bytes or more, and every sendmsg(2) and sendmmsg(2), stop in the
// kernel until the worker's supervisor (package sandbox's egress.go and
// egressemulate.go) has copied the call out of the process's memory,
// judged it, and made it itself. A shorter address (its length is a register, which the tool
// cannot change after the filter saw it) names no IP destination: IPv4
// refuses one under 16 bytes and IPv6 under 24, so those calls (netlink's
// sendto among them) run unnotified. It also confines socket(2) of a
// network tool to the families, types and protocols the supervisor
// understands, and refuses source routing and io_uring (egressProgram).
// The helper installs it last, after the other filters, on
// the thread that execs the target.

// guardFD is the helper's end of the UNIX socket pair on which it sends
// the filter's listener to the worker (network tools only).
const guardFD = 5

// minIPSockaddr is the shortest address IPv4 takes (sizeof(struct
// sockaddr_in); IPv6 takes 24): a shorter one never names a destination.
const minIPSockaddr = 16

// sockTypeMask is the kernel's SOCK_TYPE_MASK: socket(2)'s type without
// its flags.
const sockTypeMask = 0xf

// x32SyscallBit marks amd64's x32 system call numbers, which the filter's
// numbers would not match: they are refused.
const x32SyscallBit = 0x40000000

// bpfIns is one instruction of a filter under construction; jt and jf name
// labels (the empty name continues with the next instruction).
type bpfIns struct {
	label  string
	code   uint16
	k      uint32
	jt, jf string
}

// assemble resolves labels into the kernel's relative jumps.
func assemble(prog []bpfIns) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = unix.SockFilter{Code: in.code, K: in.k}
		for _, j := range []struct {
			name string
			dst  *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.name == "" {
				continue
			}
			to, ok := at[j.name]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("seccomp: bad jump to %q", j.name)
			}
			*j.dst = uint8(to - i - 1)
		}
	}
	return out, nil
}

// Offsets in struct seccomp_data; an argument's low 32 bits come first on
// the little-endian architectures this package supports.
const (
	offNr   = 0
	offArch = 4
)

func offArgLow(i uint32) uint32  { return 16 + 8*i }
func offArgHigh(i uint32) uint32 { return 20 + 8*i }

// egressProgram is the filter: other architectures pass (the
// architecture filter kills them), x32 numbers fail with ENOSYS, the
// address-carrying calls notify, socket(2) is confined to AF_UNIX,
// AF_NETLINK (name resolution asks the kernel for interfaces) and AF_INET
// and AF_INET6 of type SOCK_STREAM or SOCK_DGRAM with protocol 0, TCP,
// UDP, ICMP or ICMPv6 (no raw sockets, no SCTP, whose connectx socket
// option takes addresses the filter cannot see), and everything else
// passes but for what fails with EPERM: the socket options that route a
// packet through another address than its destination (IP_OPTIONS, whose
// source routing makes connect and sendmsg send to the first hop;
// IPV6_RTHDR, which needs no CAP_NET_RAW, and the RFC 2292 IPV6_2292RTHDR
// and IPV6_2292PKTOPTIONS; the worker's duplicate of a socket would carry
// them), and io_uring, whose operations make connections without these
// system calls. (The first filter refuses io_uring too; this one does not
// rely on it.)
func egressProgram(audit uint32) []bpfIns {
	ld := func(off uint32) bpfIns { return bpfIns{code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: off} }
	jeq := func(k uint32, jt, jf string) bpfIns {
		return bpfIns{code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, k: k, jt: jt, jf: jf}
	}
	ret := func(label string, k uint32) bpfIns {
		return bpfIns{label: label, code: unix.BPF_RET | unix.BPF_K, k: k}
	}
	errno := func(e syscall.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	return []bpfIns{
		ld(offArch),
		jeq(audit, "", "allow"),
		ld(offNr),
		{code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, k: x32SyscallBit, jt: "enosys"},
		jeq(unix.SYS_CONNECT, "connect", ""),
		jeq(unix.SYS_SENDMSG, "notify", ""),
		jeq(unix.SYS_SENDMMSG, "notify", ""),
		jeq(unix.SYS_SENDTO, "sendto", ""),
		jeq(unix.SYS_SETSOCKOPT, "setsockopt", ""),
		jeq(unix.SYS_IO_URING_SETUP, "eperm", ""),
		jeq(unix.SYS_IO_URING_ENTER, "eperm", ""),
		jeq(unix.SYS_IO_URING_REGISTER, "eperm", ""),
		jeq(unix.SYS_SOCKET, "", "allow"),
		ld(offArgLow(0)),
		jeq(unix.AF_UNIX, "allow", ""),
		jeq(unix.AF_NETLINK, "allow", ""),
		jeq(unix.AF_INET, "type", ""),
		jeq(unix.AF_INET6, "type", ""),
		ret("", errno(unix.EAFNOSUPPORT)),
		{label: "type", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(1)},
		{code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, k: sockTypeMask}, // without SOCK_NONBLOCK and SOCK_CLOEXEC
		jeq(unix.SOCK_STREAM, "proto", ""),
		jeq(unix.SOCK_DGRAM, "proto", ""),
		ret("", errno(unix.ESOCKTNOSUPPORT)),
		{label: "proto", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(2)},
		jeq(0, "allow", ""),
		jeq(unix.IPPROTO_TCP, "allow", ""),
		jeq(unix.IPPROTO_UDP, "allow", ""),
		jeq(unix.IPPROTO_ICMP, "allow", ""),
		jeq(unix.IPPROTO_ICMPV6, "allow", ""),
		ret("", errno(unix.EPROTONOSUPPORT)),
		// sendto without a destination (a connected socket) passes, and
		// so does one whose address is too short to be an IP one.
		{label: "sendto", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(4)},
		jeq(0, "", "sendtolen"),
		ld(offArgHigh(4)),
		jeq(0, "allow", ""),
		{label: "sendtolen", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(5)},
		{code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, k: minIPSockaddr, jt: "notify", jf: "allow"},
		{label: "connect", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(2)},
		{code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, k: minIPSockaddr, jt: "notify", jf: "allow"},
		// setsockopt(2)'s level and option name are registers: no
		// source routing (IPv4 options, IPv6 routing headers).
		{label: "setsockopt", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(1)},
		jeq(unix.IPPROTO_IP, "ipopt", ""),
		jeq(unix.IPPROTO_IPV6, "ipv6opt", "allow"),
		{label: "ipopt", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(2)},
		jeq(unix.IP_OPTIONS, "eperm", "allow"),
		{label: "ipv6opt", code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: offArgLow(2)},
		jeq(unix.IPV6_RTHDR, "eperm", ""),
		jeq(unix.IPV6_2292RTHDR, "eperm", ""),
		jeq(unix.IPV6_2292PKTOPTIONS, "eperm", "allow"),
		ret("notify", unix.SECCOMP_RET_USER_NOTIF),
		ret("eperm", errno(unix.EPERM)),
		ret("enosys", errno(unix.ENOSYS)),
		ret("allow", unix.SECCOMP_RET_ALLOW),
	}
}

// installEgressFilter loads the egress filter on the calling thread (and
// so on whatever it execs) and returns its listener. The thread must have
// no_new_privs. From Linux 5.19 a task waits killably once the worker
// received its notification (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV): a
// handled signal then waits for the answer, where it would drop the
// notification and restart the call, which the worker may have made
// already; older kernels refuse the flag and load the filter without it. The filter is not synchronised to the process's other
// threads: the helper sends the listener from one of them (sendListener).
func installEgressFilter() (int, error) {
	audit, ok := nativeAudit[runtime.GOARCH]
	if !ok {
		return -1, fmt.Errorf("egress filter: architecture %s not supported", runtime.GOARCH)
	}
	filter, err := assemble(egressProgram(audit))
	if err != nil {
		return -1, err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	load := func(flags uintptr) (uintptr, syscall.Errno) {
		fd, _, errno := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
		return fd, errno
	}
	fd, errno := load(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
	if errno == unix.EINVAL { // before Linux 5.19
		fd, errno = load(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	}
	if errno != 0 {
		return -1, fmt.Errorf("egress filter (seccomp user notification, Linux 5.0): %w", errno)
	}
	return int(fd), nil
}

// sendListener sends fd over the socket guardFD. sendmsg(2) is one of the
// filtered calls, so it runs on another goroutine, which never runs on
// the locked thread that carries the filter (and Go starts new threads
// for a locked thread from its template thread, made before the filter).
func sendListener(fd int) error {
	done := make(chan error, 1)
	go func() {
		done <- unix.Sendmsg(guardFD, []byte{0}, unix.UnixRights(fd), nil, 0)
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("send the egress listener: %w", err)
	}
	return nil
}

// startEgressGuard installs the filter, hands its listener to the worker
// and closes every copy the target could inherit.
func startEgressGuard() error {
	fd, err := installEgressFilter()
	if err != nil {
		return err
	}
	err = sendListener(fd)
	_ = unix.Close(fd)
	_ = unix.Close(guardFD)
	return err
}

// probeEgressGuard tries the egress guard end to end, on the calling
// (locked) thread: it installs the filter and hands the listener to the
// worker as a call does, then connects sock (an IPv4 UDP socket made
// before the other filters) to AF_UNSPEC, a notified call the worker's
// supervisor answers as it answers a tool's: it reads the address with
// process_vm_readv(2), duplicates the socket with pidfd_getfd(2), checks
// the notification with SECCOMP_IOCTL_NOTIF_ID_VALID, makes the call and
// sends the answer. Anything but success is the "egress-guard" gap.
func probeEgressGuard(sock int) error {
	if sock < 0 {
		return errors.New("no IPv4 socket to probe with")
	}
	if err := startEgressGuard(); err != nil {
		return err
	}
	var unspec [minIPSockaddr]byte // AF_UNSPEC: a disconnect
	_, _, errno := syscall.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(unsafe.Pointer(&unspec[0])), uintptr(len(unspec)))
	switch errno {
	case 0:
		return nil
	case unix.ENOSYS:
		return errors.New("the worker did not answer a notified connect (no listener received, or none running)")
	case unix.EFAULT:
		return errors.New("the worker could not read the sandbox's memory with process_vm_readv (Yama ptrace_scope?)")
	}
	return fmt.Errorf("the worker answered a notified connect with %w (pidfd_getfd, Linux 5.6, or ptrace access refused?)", errno)
}

// probeSocket makes probeEgressGuard's socket (-1 when it cannot).
func probeSocket() int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}
