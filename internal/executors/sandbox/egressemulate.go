//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The supervisor never lets the kernel run a notified call
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE would make the kernel read the
// sockaddr from the tool's memory again, after the check, where another
// thread may have rewritten it). It copies what the call would send out
// of the tool's memory, takes a duplicate of the tool's socket
// (pidfd_getfd(2)), checks the copy and, when allowed, makes the call
// itself on the duplicate with the copy, and answers with its result.

// Bounds of what one notified call may carry.
const (
	maxPayload  = 64 << 10 // bytes of one message; a stream socket's send is cut short to it
	maxMMsgs    = 8        // messages of one sendmmsg(2); it sends fewer, as it may
	maxIovecs   = 1024     // UIO_MAXIOV: more is EMSGSIZE
	maxSockaddr = 128      // sizeof(struct sockaddr_storage)
	msghdrSize  = 56       // struct msghdr on 64-bit Linux
	mmsghdrSize = 64       // struct mmsghdr
)

// sockCall is the copy of a notified call.
type sockCall struct {
	nr    int64
	pid   int
	fd    int
	flags int
	msgs  []sockMsg
	vec   uint64 // sendmmsg: the tool's mmsghdr array, for msg_len
}

// sockMsg is one message (or connect's address): name is nil when the
// call names no destination; truncated says data was cut to maxPayload.
type sockMsg struct {
	name      []byte
	data      []byte
	truncated bool
}

// errGone marks a notification whose task left the call: nothing to answer.
const errGone = syscall.Errno(0xffff)

// handle answers one notification; it runs on a goroutine of its own.
func (s *egressSupervisor) handle(lfd int, n *seccompNotif) {
	val, errno := s.emulate(lfd, n)
	if errno == errGone {
		return
	}
	resp := seccompNotifResp{ID: n.ID, Val: val}
	if errno != 0 {
		resp = seccompNotifResp{ID: n.ID, Error: -int32(errno)}
	}
	_ = notifSend(lfd, &resp) // ENOENT: the task left the call meanwhile
}

// emulate copies the call, duplicates its socket, checks that the
// notification still waits (so both came from the caller), judges every
// destination and makes the call.
func (s *egressSupervisor) emulate(lfd int, n *seccompNotif) (int64, syscall.Errno) {
	c, errno := readCall(n)
	if errno == 0 {
		var dup int
		dup, errno = taskSocket(c.pid, c.fd)
		if errno == 0 {
			if !s.track(dup) {
				return 0, unix.EAGAIN // the supervisor is stopping
			}
			defer s.untrack(dup)
		}
		if v := notifIDValid(lfd, n.ID); v != 0 {
			return 0, v
		}
		if errno == 0 {
			return s.perform(lfd, n.ID, c, dup)
		}
		return 0, errno
	}
	if v := notifIDValid(lfd, n.ID); v != 0 {
		return 0, v
	}
	return 0, errno
}

// perform judges and makes the call on dup, the duplicate of the tool's
// socket. Only IPv4 and IPv6 sockets are served: the supervisor cannot
// act for the tool on a UNIX socket (the path would be resolved in the
// worker's mount namespace, with its permissions, and the peer would see
// the worker's credentials), nor on a netlink socket (its credentials);
// those calls fail with EACCES.
func (s *egressSupervisor) perform(lfd int, id uint64, c *sockCall, dup int) (int64, syscall.Errno) {
	domain, err := unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, errnoOf(err)
	}
	if domain != unix.AF_INET && domain != unix.AF_INET6 {
		s.refuse(fmt.Sprintf("%s on a socket of family %d", callName(c.nr), domain), errors.New("only IPv4 and IPv6 sockets are served"))
		return 0, unix.EACCES
	}
	typ, err := unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return 0, errnoOf(err)
	}
	for i, m := range c.msgs {
		errno := s.check(c.nr, m)
		if errno == 0 && m.truncated && typ != unix.SOCK_STREAM {
			errno = unix.EMSGSIZE
		}
		if errno != 0 {
			if i == 0 {
				return 0, errno
			}
			c.msgs = c.msgs[:i] // sendmmsg: what comes before is sent
			break
		}
		if m.truncated {
			c.msgs = c.msgs[:i+1] // a stream's message cut short: the kernel's sendmmsg stops after it
			break
		}
	}
	switch c.nr {
	case unix.SYS_CONNECT:
		name := c.msgs[0].name
		_, _, errno := syscall.Syscall(unix.SYS_CONNECT, uintptr(dup), uintptr(unsafe.Pointer(unsafe.SliceData(name))), uintptr(len(name)))
		return 0, errno
	case unix.SYS_SENDTO:
		m := c.msgs[0]
		r, _, errno := syscall.Syscall6(unix.SYS_SENDTO, uintptr(dup), uintptr(unsafe.Pointer(unsafe.SliceData(m.data))), uintptr(len(m.data)),
			uintptr(sendFlags(c.flags)), uintptr(unsafe.Pointer(unsafe.SliceData(m.name))), uintptr(len(m.name)))
		return int64(r), errno
	}
	return s.sendMsgs(lfd, id, c, dup)
}

// sendMsgs makes sendmsg(2), or sendmmsg(2) as the kernel does it: one
// sendmsg per message, stopping after an error or a message sent short
// (or cut to maxPayload: the rest of a stream must not follow it), the
// count sent, an error only when the first fails; each sent message's
// msg_len is written back. What was sent is reported sent even when
// msg_len cannot be written (the kernel would say EFAULT, and a tool
// that believed it would send the data again).
func (s *egressSupervisor) sendMsgs(lfd int, id uint64, c *sockCall, dup int) (int64, syscall.Errno) {
	sent := make([]uint32, 0, len(c.msgs))
	var first syscall.Errno
	for _, m := range c.msgs {
		iov := unix.Iovec{Base: unsafe.SliceData(m.data)}
		iov.SetLen(len(m.data))
		hdr := unix.Msghdr{Iov: &iov, Iovlen: 1}
		if m.name != nil {
			hdr.Name, hdr.Namelen = unsafe.SliceData(m.name), uint32(len(m.name))
		}
		r, _, errno := syscall.Syscall(unix.SYS_SENDMSG, uintptr(dup), uintptr(unsafe.Pointer(&hdr)), uintptr(sendFlags(c.flags)))
		if errno != 0 {
			first = errno
			break
		}
		sent = append(sent, uint32(r))
		if int(r) < len(m.data) || m.truncated {
			break
		}
	}
	if c.nr == unix.SYS_SENDMSG {
		if first != 0 {
			return 0, first
		}
		return int64(sent[0]), 0
	}
	if len(sent) == 0 {
		return 0, first
	}
	switch v := notifIDValid(lfd, id); v {
	case errGone:
		return 0, v
	case 0: // still the caller's memory
		for i, n := range sent {
			var b [4]byte
			binary.NativeEndian.PutUint32(b[:], n)
			if writeMem(c.pid, c.vec+uint64(i)*mmsghdrSize+msghdrSize, b[:]) != 0 {
				break
			}
		}
	}
	return int64(len(sent)), 0
}

// sendFlags are the tool's flags without MSG_ZEROCOPY (the buffer is
// the worker's) and with MSG_NOSIGNAL (a SIGPIPE would be the worker's;
// the tool gets EPIPE).
func sendFlags(f int) int { return f&^unix.MSG_ZEROCOPY | unix.MSG_NOSIGNAL }

// check judges one message's destination.
func (s *egressSupervisor) check(nr int64, m sockMsg) syscall.Errno {
	if m.name == nil {
		return 0
	}
	dst, errno := parseSockaddr(m.name, nr == unix.SYS_CONNECT)
	if errno != 0 || !dst.IsValid() {
		return errno
	}
	return s.judge(dst)
}

// readCall copies a notified call's arguments out of the tool's memory.
func readCall(n *seccompNotif) (*sockCall, syscall.Errno) {
	a := n.Data.Args
	c := &sockCall{nr: int64(n.Data.Nr), pid: int(n.Pid), fd: int(int32(a[0]))}
	switch c.nr {
	case unix.SYS_CONNECT:
		name, errno := readSockaddr(c.pid, a[1], uint64(uint32(a[2]))) // an int: the kernel reads 32 bits
		c.msgs = []sockMsg{{name: name}}
		return c, errno
	case unix.SYS_SENDTO:
		c.flags = int(int32(a[3]))
		m := sockMsg{}
		var errno syscall.Errno
		if a[4] != 0 {
			if m.name, errno = readSockaddr(c.pid, a[4], uint64(uint32(a[5]))); errno != 0 {
				return nil, errno
			}
		}
		m.data, m.truncated, errno = readPayload(c.pid, []remoteIovec{{a[1], a[2]}})
		c.msgs = []sockMsg{m}
		return c, errno
	case unix.SYS_SENDMSG:
		c.flags = int(int32(a[2]))
		m, errno := readMsghdr(c.pid, a[1])
		c.msgs = []sockMsg{m}
		return c, errno
	case unix.SYS_SENDMMSG:
		c.flags, c.vec = int(int32(a[3])), a[1]
		count := min(uint64(uint32(a[2])), maxMMsgs)
		for i := range count {
			m, errno := readMsghdr(c.pid, a[1]+i*mmsghdrSize)
			if errno != 0 {
				if i == 0 {
					return nil, errno
				}
				break
			}
			c.msgs = append(c.msgs, m)
		}
		return c, 0
	}
	return nil, unix.ENOSYS
}

// remoteIovec is a struct iovec of the tool's.
type remoteIovec struct{ base, n uint64 }

// readMsghdr copies one struct msghdr: its name and payload. Control
// messages are refused (EACCES): the supervisor would have to vet them.
func readMsghdr(pid int, addr uint64) (sockMsg, syscall.Errno) {
	h, errno := readMem(pid, addr, msghdrSize)
	if errno != 0 {
		return sockMsg{}, errno
	}
	u64 := func(off int) uint64 { return binary.NativeEndian.Uint64(h[off:]) }
	name, nameLen := u64(0), uint64(binary.NativeEndian.Uint32(h[8:12]))
	iovAddr, iovLen, controlLen := u64(16), u64(24), u64(40)
	if controlLen != 0 {
		return sockMsg{}, unix.EACCES
	}
	var m sockMsg
	if name != 0 && nameLen != 0 {
		if int32(nameLen) < 0 {
			return sockMsg{}, unix.EINVAL
		}
		if m.name, errno = readSockaddr(pid, name, min(nameLen, maxSockaddr)); errno != 0 {
			return sockMsg{}, errno
		}
	}
	if iovLen > maxIovecs {
		return sockMsg{}, unix.EMSGSIZE
	}
	var iovs []remoteIovec
	if iovLen > 0 {
		raw, errno := readMem(pid, iovAddr, int(iovLen)*16)
		if errno != 0 {
			return sockMsg{}, errno
		}
		for i := range int(iovLen) {
			iovs = append(iovs, remoteIovec{binary.NativeEndian.Uint64(raw[16*i:]), binary.NativeEndian.Uint64(raw[16*i+8:])})
		}
	}
	m.data, m.truncated, errno = readPayload(pid, iovs)
	return m, errno
}

// readPayload copies the bytes the iovecs describe, up to maxPayload,
// with one process_vm_readv(2).
func readPayload(pid int, iovs []remoteIovec) ([]byte, bool, syscall.Errno) {
	var total uint64
	for _, v := range iovs {
		total += min(v.n, 1<<48) // no overflow: anything near is EFAULT anyway
	}
	buf := make([]byte, min(total, maxPayload))
	if len(buf) == 0 {
		return buf, false, 0
	}
	remote := make([]unix.RemoteIovec, 0, len(iovs))
	for left := len(buf); left > 0 && len(iovs) > 0; iovs = iovs[1:] {
		if l := int(min(iovs[0].n, uint64(left))); l > 0 {
			remote = append(remote, unix.RemoteIovec{Base: uintptr(iovs[0].base), Len: l})
			left -= l
		}
	}
	local := []unix.Iovec{{Base: unsafe.SliceData(buf)}}
	local[0].SetLen(len(buf))
	got, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil || got != len(buf) {
		return nil, false, unix.EFAULT
	}
	return buf, total > maxPayload, 0
}

// readSockaddr copies a struct sockaddr of n bytes at addr. Lengths
// outside 2..128 are EINVAL, as the kernel says.
func readSockaddr(pid int, addr, n uint64) ([]byte, syscall.Errno) {
	if n < 2 || n > maxSockaddr {
		return nil, unix.EINVAL
	}
	return readMem(pid, addr, int(n))
}

// parseSockaddr reads a destination as the kernel will: AF_INET (16
// bytes at least), AF_INET6 (24), AF_UNSPEC as a disconnect for connect
// but as AF_INET for a datagram sent to it (IPv4 UDP reads it so); other
// families name no IP destination (an IP socket refuses them); too short
// an address is EINVAL.
func parseSockaddr(b []byte, connect bool) (netip.AddrPort, syscall.Errno) {
	switch binary.NativeEndian.Uint16(b[0:2]) {
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
	return netip.AddrPort{}, 0
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

// writeMem writes b at addr of process pid.
func writeMem(pid int, addr uint64, b []byte) syscall.Errno {
	local := []unix.Iovec{{Base: unsafe.SliceData(b)}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	got, err := unix.ProcessVMWritev(pid, local, remote, 0)
	if err != nil || got != len(b) {
		return unix.EFAULT
	}
	return 0
}

// taskSocket duplicates file descriptor fd of thread tid into the
// worker (pidfd_getfd(2), Linux 5.6). The thread's own descriptor table
// is read (PIDFD_THREAD, Linux 6.9); older kernels take its process's,
// which a thread shares unless it was made without CLONE_FILES.
func taskSocket(tid, fd int) (int, syscall.Errno) {
	pidfd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if errors.Is(err, unix.EINVAL) {
		tgid, terr := threadGroup(tid)
		if terr != nil {
			return -1, unix.ESRCH
		}
		pidfd, err = unix.PidfdOpen(tgid, 0)
	}
	if err != nil {
		return -1, errnoOf(err)
	}
	defer func() { _ = unix.Close(pidfd) }()
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return -1, unix.EBADF // the tool's fd is not open: as the kernel answers
		}
		return -1, errnoOf(err)
	}
	return dup, 0
}

// threadGroup reads the process id of thread tid.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Tgid")
}

// errnoOf is err's errno; what is not one (or is one the tool could
// misread, such as ESRCH or EPERM of the worker's own calls) is EACCES.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) && e != unix.EPERM && e != unix.ESRCH {
		return e
	}
	return unix.EACCES
}

func callName(nr int64) string {
	switch nr {
	case unix.SYS_CONNECT:
		return "connect"
	case unix.SYS_SENDTO:
		return "sendto"
	case unix.SYS_SENDMSG:
		return "sendmsg"
	}
	return "sendmmsg"
}
