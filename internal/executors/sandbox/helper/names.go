package helper

// Env is the environment variable (=1) that, with argv[0] Arg0, marks a
// helper process; no tool may set it.
const Env = "TOOLWIRE_SANDBOX_HELPER"

// The mechanisms the helper applies and reports in probe mode; package
// sandbox exports them (sandbox.MechUserNS, ...) with their meaning.
const (
	MechUserNS        = "userns"
	MechProc          = "proc"
	MechTmpfs         = "tmpfs"
	MechLandlock      = "landlock"
	MechLandlockScope = "landlock-scope"
	MechLandlockUnix  = "landlock-unix"
	MechSeccomp       = "seccomp"
	GapEgressGuard    = "egress-guard"
)
