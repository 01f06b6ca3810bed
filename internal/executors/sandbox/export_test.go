//go:build linux

package sandbox

import "sync"

// NewWithoutNamespaces is New on a host pretending to have no user
// namespaces, to test the weaker path.
func NewWithoutNamespaces(cfg Config) (*Executor, error) { return newExecutor(cfg, true) }

// ParkedHelpers lists the pids of the helpers parked in e's pool.
func (e *Executor) ParkedHelpers() []int { return e.pool.parkedPIDs() }

// KillNextTakenHelper makes e SIGKILL the next parked helper a call takes,
// after the take and before the call is sent to it, and send its pid on
// killed (buffered). Call it before e runs any call.
func (e *Executor) KillNextTakenHelper(killed chan<- int) {
	var once sync.Once
	e.tookHelper = func(p *proc) {
		once.Do(func() {
			// The kill returns with SIGKILL pending: the helper runs no
			// more of its code, so it never reads the call. (Were the
			// kill to fail, the helper would run the call, and the test
			// would find no loss logged.)
			_ = p.cmd.Process.Kill()
			killed <- p.cmd.Process.Pid
		})
	}
}
