//go:build linux

package sandbox

import (
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The supervisor's side of the egress filter (helper/egressfilter.go):
// receiving, checking and answering its notifications.

// The kernel's user-notification structures (linux/seccomp.h).
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

func notifIoctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, errno := syscall.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

func notifRecv(fd int, n *seccompNotif) error {
	*n = seccompNotif{}
	return notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n))
}

func notifSend(fd int, r *seccompNotifResp) error {
	return notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(r))
}

// seccompIoctlNotifIDValidOld is SECCOMP_IOCTL_NOTIF_ID_VALID as Linux
// defined it before 5.17 (_IOR; x/sys has the corrected _IOW, which older
// kernels refuse with EINVAL).
const seccompIoctlNotifIDValidOld = 0x80082102

// notifIDValid reports whether the notification id still waits (0): the
// task that made it is still in that system call, so what was read from
// its memory and its descriptor table (by pid) was read from it. ENOENT
// (gone) is errGone: nothing to answer; any other failure is EACCES, so
// the call is answered and fails.
func notifIDValid(fd int, id uint64) syscall.Errno {
	err := notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id))
	if errors.Is(err, unix.EINVAL) {
		err = notifIoctl(fd, seccompIoctlNotifIDValidOld, unsafe.Pointer(&id))
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, unix.ENOENT):
		return errGone
	}
	return unix.EACCES
}

var errNoListener = errors.New("the helper sent no egress listener")
