package faulttest

import (
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on a goroutine of its own whose thread is moved into
// the named network namespace (/run/netns/name) and back: a socket fn
// makes belongs to that namespace for its whole life. The thread is
// locked meanwhile, so no other goroutine runs in the namespace; when it
// cannot be moved back it stays locked and the runtime ends it with the
// goroutine, so no other goroutine ever runs on it.
func inNetns(name string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once the thread is back in its own namespace.
		done <- func() error {
			target, err := unix.Open(filepath.Join("/run/netns", name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("open namespace %s: %w", name, err)
			}
			defer unix.Close(target)
			orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("open own namespace: %w", err)
			}
			defer unix.Close(orig)
			if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("enter namespace %s: %w", name, err)
			}
			ferr := fn()
			if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
				// The thread stays locked: it ends with this goroutine.
				return fmt.Errorf("leave namespace %s: %w (then: %v)", name, err, ferr)
			}
			runtime.UnlockOSThread()
			return ferr
		}()
	}()
	return <-done
}
