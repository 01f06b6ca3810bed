//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

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

// egressSupervisor answers the egress filter's notifications of one call
// (egressemulate.go): for each it copies the call out of the process's
// memory, judges its destinations with the guard (or the resolver rule),
// and makes the call itself on a duplicate of the tool's socket, or fails
// it with EACCES. It runs on a goroutine of its own until the helper sent
// no listener, the filter has no task left, or stop; each notification
// is handled on a goroutine of its own (a blocking socket blocks
// connect), at most maxPending at a time, all waited for.
type egressSupervisor struct {
	guard     *egress.Guard
	resolvers []netip.Addr
	log       *slog.Logger
	sock      *os.File // the worker's end of the socket pair
	stopR     *os.File // readable once stop was called
	stopW     *os.File
	done      chan struct{}
	refused   atomic.Int32
	handlers  sync.WaitGroup
	mu        sync.Mutex
	inflight  map[int]struct{} // duplicated sockets in use by handlers
	stopping  bool
	pending   atomic.Int32
}

// maxPending bounds the notifications of one call handled at a time;
// more are answered EAGAIN. Each waiting thread of the tool holds one.
const maxPending = 64

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
		stopR: stopR, stopW: stopW, done: make(chan struct{}), inflight: map[int]struct{}{}}
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
	defer func() {
		s.shutdown()
		s.handlers.Wait()
		_ = unix.Close(fd)
	}()
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

// answer receives one notification and hands it to a goroutine of its
// own; every notification received is answered.
func (s *egressSupervisor) answer(fd int) {
	n := new(seccompNotif)
	if err := notifRecv(fd, n); err != nil {
		return // ENOENT: the task left the call (a signal, or killed)
	}
	if s.pending.Add(1) > maxPending {
		s.pending.Add(-1)
		_ = notifSend(fd, &seccompNotifResp{ID: n.ID, Error: -int32(unix.EAGAIN)})
		return
	}
	s.handlers.Go(func() {
		defer s.pending.Add(-1)
		s.handle(fd, n)
	})
}

// track registers a duplicated socket of a handler, so that shutdown can
// end a connect or send blocked on it; false once stopping.
func (s *egressSupervisor) track(dup int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		_ = unix.Close(dup)
		return false
	}
	s.inflight[dup] = struct{}{}
	return true
}

// untrack closes a handler's duplicate.
func (s *egressSupervisor) untrack(dup int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, dup)
	_ = unix.Close(dup)
}

// shutdown ends what handlers are blocked in: the process is gone (or
// the call is over), so its sockets are of no use any more.
func (s *egressSupervisor) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for dup := range s.inflight {
		_ = unix.Shutdown(dup, unix.SHUT_RDWR)
	}
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
	s.refuse(dst.String(), err)
	return unix.EACCES
}

// refuse logs a refusal (maxLoggedRefusals per call).
func (s *egressSupervisor) refuse(what string, why error) {
	if s.refused.Add(1) <= maxLoggedRefusals {
		s.log.Warn("sandbox: egress guard refused a connection of a network tool", "destination", what, "why", why)
	}
}
