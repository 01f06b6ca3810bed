//go:build linux

package helper

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/testdeps"
	"golang.org/x/sys/unix"
)

// filteredErrno runs call on a thread that carries only the egress
// filter (no_new_privs, then installEgressFilter, as the helper does
// without the first filter): the thread ends with the goroutine, so the
// filter leaves with it.
func filteredErrno(t *testing.T, calls map[string]func() syscall.Errno) map[string]syscall.Errno {
	t.Helper()
	type result struct {
		got map[string]syscall.Errno
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- result{err: err}
			return
		}
		lfd, err := installEgressFilter()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer func() { _ = unix.Close(lfd) }()
		got := map[string]syscall.Errno{}
		for name, call := range calls {
			got[name] = call()
		}
		done <- result{got: got}
	}()
	r := <-done
	require.NoError(t, r.err)
	return r.got
}

// The egress filter refuses, on its own (a host where the first seccomp
// filter failed its probe still runs the guard), io_uring, whose
// operations connect and send without the filtered system calls, and the
// socket options that source-route: IPv4 options (LSRR here, which root
// may set and an unprivileged tool may on older kernels) and IPv6 routing
// headers. Other socket options still work.
func TestEgressFilterRefusesBypasses(t *testing.T) {
	t.Parallel()
	if _, ok := nativeAudit[runtime.GOARCH]; !ok {
		testdeps.Missing(t, "amd64 or arm64", "the sandbox's seccomp filters know no system call numbers for %s", runtime.GOARCH)
	}
	fd4, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd4) })
	fd6, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd6) })
	asErrno := func(err error) syscall.Errno {
		if err == nil {
			return 0
		}
		var e syscall.Errno
		require.ErrorAs(t, err, &e)
		return e
	}
	lsrr := string([]byte{1, 0x83, 7, 4, 169, 254, 169, 254})
	got := filteredErrno(t, map[string]func() syscall.Errno{
		"io_uring_setup": func() syscall.Errno {
			var params [120]byte // struct io_uring_params
			r, _, e := syscall.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
			if e == 0 {
				_ = unix.Close(int(r))
			}
			return e
		},
		"io_uring_enter": func() syscall.Errno {
			_, _, e := syscall.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd4), 0, 0, 0, 0, 0)
			return e
		},
		"io_uring_register": func() syscall.Errno {
			_, _, e := syscall.RawSyscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd4), 0, 0, 0, 0, 0)
			return e
		},
		"ip_options": func() syscall.Errno {
			return asErrno(unix.SetsockoptString(fd4, unix.IPPROTO_IP, unix.IP_OPTIONS, lsrr))
		},
		"ipv6_rthdr": func() syscall.Errno {
			return asErrno(unix.SetsockoptString(fd6, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, ""))
		},
		"ipv6_2292rthdr": func() syscall.Errno {
			return asErrno(unix.SetsockoptInt(fd6, unix.IPPROTO_IPV6, unix.IPV6_2292RTHDR, 1))
		},
		"ipv6_2292pktoptions": func() syscall.Errno {
			return asErrno(unix.SetsockoptString(fd6, unix.IPPROTO_IPV6, unix.IPV6_2292PKTOPTIONS, ""))
		},
		"ip_tos":    func() syscall.Errno { return asErrno(unix.SetsockoptInt(fd4, unix.IPPROTO_IP, unix.IP_TOS, 0x10)) },
		"so_sndbuf": func() syscall.Errno { return asErrno(unix.SetsockoptInt(fd4, unix.SOL_SOCKET, unix.SO_SNDBUF, 8192)) },
	})
	require.Equal(t, map[string]syscall.Errno{
		"io_uring_setup": unix.EPERM, "io_uring_enter": unix.EPERM, "io_uring_register": unix.EPERM,
		"ip_options": unix.EPERM, "ipv6_rthdr": unix.EPERM, "ipv6_2292rthdr": unix.EPERM, "ipv6_2292pktoptions": unix.EPERM,
		"ip_tos": 0, "so_sndbuf": 0,
	}, got)
}
