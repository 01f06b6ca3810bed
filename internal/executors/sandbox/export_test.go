//go:build linux

package sandbox

// NewWithoutNamespaces is New on a host pretending to have no user
// namespaces, to test the weaker path.
func NewWithoutNamespaces(cfg Config) (*Executor, error) { return newExecutor(cfg, true) }

// ParkedHelpers lists the pids of the helpers parked in e's pool.
func (e *Executor) ParkedHelpers() []int { return e.pool.parkedPIDs() }
