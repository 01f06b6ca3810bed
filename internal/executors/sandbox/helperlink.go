//go:build linux

package sandbox

import "github.com/toolwire/toolwire/internal/executors/sandbox/helper"

// The helper lives in package helper (see its documentation for why); these
// are its protocol's names here.
type (
	helperConfig = helper.Config
	rlimit       = helper.Rlimit
	probeReport  = helper.ProbeReport
)

const (
	helperArg0 = helper.Arg0
	inside     = helper.Inside
	parkedArg  = helper.ParkedArg
	readyByte  = helper.ReadyByte
	takenByte  = helper.TakenByte
)

// IsHelper reports whether this process is a sandbox helper started by
// the sandbox executor. Binaries that may run sandboxed tools call
//
//	if sandbox.IsHelper() {
//		sandbox.RunHelper()
//	}
//
// first thing in main (and TestMain). Package helper's init does the same,
// early in the binary's initialisation, so that every binary importing
// the sandbox — a test binary too — acts as a helper when started as one,
// and never runs its own main.
func IsHelper() bool { return helper.IsHelper() }

// RunHelper sets up the sandbox described on fd 3 and execs the target.
// It never returns: on any failure it reports on fd 4 and exits 126.
func RunHelper() { helper.Run() }

// landlockNet reports whether the kernel's Landlock restricts TCP ports.
func landlockNet() bool { return helper.LandlockNet() }
