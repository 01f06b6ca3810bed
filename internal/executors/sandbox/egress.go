//go:build linux

package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/egress"
)

// resolvers returns the nameserver addresses of the file resolvConf
// (none when it cannot be read).
func resolvers(resolvConf string) []netip.Addr {
	f, err := os.Open(resolvConf)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				out = append(out, a.WithZone("").Unmap())
			}
		}
	}
	return out
}

// egressSupervisor answers the egress filter's notifications of one call:
// it reads each destination from the process's memory and lets the
// system call continue when the guard (or the resolver rule) allows it,
// or fails it with EACCES. It runs on a goroutine of its own until the
// helper sent no listener, the filter has no task left, or stop.
type egressSupervisor struct {
	guard     *egress.Guard
	resolvers []netip.Addr
	log       *slog.Logger
	sock      *os.File // the worker's end of the socket pair
	stopR     *os.File // readable once stop was called
	stopW     *os.File
	done      chan struct{}
	refused   int
}

// maxLoggedRefusals bounds the WARN lines of one call.
const maxLoggedRefusals = 10

// newEgressGuard makes the socket pair of a call's listener: the helper's
// end (for spawn, closed by the caller after it) and a supervisor that
// is not running yet.
func (e *Executor) newEgressGuard(log *slog.Logger) (helperEnd *os.File, s *egressSupervisor, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: egress guard socket pair: %w", err)
	}
	stopR, stopW, err := os.Pipe()
	if err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, fmt.Errorf("sandbox: egress guard pipe: %w", err)
	}
	s = &egressSupervisor{guard: e.guard, resolvers: resolvers(e.cfg.ResolvConf), log: log, sock: os.NewFile(uintptr(fds[0]), "egress-guard"),
		stopR: stopR, stopW: stopW, done: make(chan struct{})}
	return os.NewFile(uintptr(fds[1]), "egress-guard-helper"), s, nil
}

// stop ends the running supervisor and waits for it. Any task still
// filtered then fails its notified calls with ENOSYS (the kernel's answer
// once the listener is closed): the guard fails closed.
func (s *egressSupervisor) stop() {
	_ = s.stopW.Close()
	<-s.done
	s.close()
}

// close releases what newEgressGuard made (of a supervisor that never
// ran, or after stop).
func (s *egressSupervisor) close() {
	_ = s.stopW.Close()
	_ = s.stopR.Close()
	_ = s.sock.Close()
}

func (s *egressSupervisor) run() {
	defer close(s.done)
	fd, err := s.receive()
	if err != nil {
		if !errors.Is(err, errNoListener) {
			s.log.Warn("sandbox: egress guard", "err", err)
		}
		return
	}
	defer func() { _ = unix.Close(fd) }()
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(s.stopR.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			s.log.Warn("sandbox: egress guard: poll", "err", err)
			return
		}
		if pfd[1].Revents != 0 || pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			return // stopped, or no task uses the filter any more
		}
		if pfd[0].Revents&unix.POLLIN != 0 {
			s.answer(fd)
		}
	}
}

// receive waits for the helper's listener (or its exit, or stop).
func (s *egressSupervisor) receive() (int, error) {
	for {
		pfd := []unix.PollFd{{Fd: int32(s.sock.Fd()), Events: unix.POLLIN}, {Fd: int32(s.stopR.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return -1, fmt.Errorf("poll: %w", err)
		}
		if pfd[1].Revents != 0 {
			return -1, errNoListener
		}
		break
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(s.sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("receive the listener: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, errNoListener // EOF: the helper failed before (its set-up error says why)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, errNoListener
	}
	return fds[0], nil
}

// answer receives one notification and answers it.
func (s *egressSupervisor) answer(fd int) {
	var n seccompNotif
	if err := notifRecv(fd, &n); err != nil {
		return // ENOENT: the task left the call (a signal, or killed)
	}
	dst, errno := s.destination(&n)
	if !notifValid(fd, n.ID) {
		return // gone: what was read may not be its memory any more
	}
	if errno == 0 && dst.IsValid() {
		errno = s.judge(dst)
	}
	resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	if errno != 0 {
		resp = seccompNotifResp{ID: n.ID, Error: -int32(errno)}
	}
	_ = notifSend(fd, &resp) // ENOENT: the task left the call meanwhile
}

// judge applies the guard, and lets the configured resolvers through on
// port 53.
func (s *egressSupervisor) judge(dst netip.AddrPort) syscall.Errno {
	addr := dst.Addr().Unmap()
	if dst.Port() == 53 {
		for _, r := range s.resolvers {
			if r == addr {
				return 0
			}
		}
	}
	err := s.guard.Check(dst)
	if err == nil {
		return 0
	}
	s.refused++
	if s.refused <= maxLoggedRefusals {
		s.log.Warn("sandbox: egress guard refused a connection of a network tool", "destination", dst.String(), "why", err)
	}
	return unix.EACCES
}

// maxSockaddr is sizeof(struct sockaddr_storage): longer addresses are
// EINVAL for connect and sendto, and cut to it for sendmsg.
const maxSockaddr = 128

// destination reads the destination address of a notified call. An
// invalid AddrPort with errno 0 means there is none to judge (a
// connected socket, a UNIX or netlink address, a disconnect); an errno
// fails the call.
func (s *egressSupervisor) destination(n *seccompNotif) (netip.AddrPort, syscall.Errno) {
	pid, args := int(n.Pid), n.Data.Args
	switch int64(n.Data.Nr) {
	case unix.SYS_CONNECT:
		return readSockaddr(pid, args[1], args[2], true)
	case unix.SYS_SENDTO:
		if args[4] == 0 {
			return netip.AddrPort{}, 0
		}
		return readSockaddr(pid, args[4], args[5], false)
	case unix.SYS_SENDMSG:
		return s.msgDestinations(pid, args[1], 1, msghdrSize)
	case unix.SYS_SENDMMSG:
		return s.msgDestinations(pid, args[1], min(args[2], 1024), mmsghdrSize) // the kernel sends at most UIO_MAXIOV
	}
	return netip.AddrPort{}, unix.ENOSYS
}

// Sizes of struct msghdr and struct mmsghdr on 64-bit Linux.
const (
	msghdrSize  = 56
	mmsghdrSize = 64
)

// msgDestinations judges the msg_name of each of count headers of size
// bytes at addr (one msghdr, or the mmsghdrs of sendmmsg); every one must
// pass.
func (s *egressSupervisor) msgDestinations(pid int, addr, count, size uint64) (netip.AddrPort, syscall.Errno) {
	if count == 0 {
		return netip.AddrPort{}, 0
	}
	hdrs, errno := readMem(pid, addr, int(size*count))
	if errno != 0 {
		return netip.AddrPort{}, errno
	}
	for i := range count {
		h := hdrs[i*size:]
		name, nameLen := binary.NativeEndian.Uint64(h[0:8]), binary.NativeEndian.Uint32(h[8:12])
		if name == 0 || nameLen == 0 {
			continue
		}
		dst, errno := readSockaddr(pid, name, uint64(min(nameLen, maxSockaddr)), false)
		if errno == 0 && dst.IsValid() {
			errno = s.judge(dst)
		}
		if errno != 0 {
			return netip.AddrPort{}, errno
		}
	}
	return netip.AddrPort{}, 0
}

// readSockaddr reads and parses a struct sockaddr of n bytes at addr.
func readSockaddr(pid int, addr, n uint64, connect bool) (netip.AddrPort, syscall.Errno) {
	if n < 2 || n > maxSockaddr {
		return netip.AddrPort{}, unix.EINVAL
	}
	b, errno := readMem(pid, addr, int(n))
	if errno != 0 {
		return netip.AddrPort{}, errno
	}
	return parseSockaddr(b, connect)
}

// parseSockaddr reads a destination as the kernel will: AF_INET (16
// bytes at least), AF_INET6 (24), AF_UNSPEC as a disconnect for connect
// but as AF_INET for a datagram sent to it (IPv4 UDP reads it so);
// AF_UNIX and AF_NETLINK carry no IP address; any other family is
// refused.
func parseSockaddr(b []byte, connect bool) (netip.AddrPort, syscall.Errno) {
	family := binary.NativeEndian.Uint16(b[0:2])
	switch family {
	case unix.AF_UNIX, unix.AF_NETLINK:
		return netip.AddrPort{}, 0
	case unix.AF_UNSPEC:
		if connect || len(b) < 16 {
			return netip.AddrPort{}, 0 // a disconnect, or no address for IPv6 (IPv4 refuses it as too short)
		}
		fallthrough
	case unix.AF_INET:
		if len(b) < 16 {
			return netip.AddrPort{}, unix.EINVAL
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), 0
	case unix.AF_INET6:
		if len(b) < 24 {
			return netip.AddrPort{}, unix.EINVAL
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:4])), 0
	}
	return netip.AddrPort{}, unix.EAFNOSUPPORT
}

// readMem reads n bytes at addr of process pid (a thread id in the
// worker's pid namespace, as the kernel reports it).
func readMem(pid int, addr uint64, n int) ([]byte, syscall.Errno) {
	buf := make([]byte, n)
	local := []unix.Iovec{{Base: unsafe.SliceData(buf)}}
	local[0].SetLen(n)
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
	got, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil || got != n {
		return nil, unix.EFAULT
	}
	return buf, 0
}
