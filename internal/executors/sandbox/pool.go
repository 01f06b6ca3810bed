//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The helper pool (doc.go, "The helper pool"): helpers started ahead for
// calls of tools without network access, parked on their config pipe.
const (
	// readyWait bounds a pooled helper's start; a failed start is retried
	// after retryWait, doubled after each further failure up to
	// maxRetryWait.
	readyWait    = 30 * time.Second
	retryWait    = time.Second
	maxRetryWait = time.Minute
)

// errHelperLost is a pooled helper that ended before it read its call.
var errHelperLost = errors.New("sandbox: a parked helper ended before it took its call")

// pool keeps up to size helpers parked. Each is owned by a goroutine
// locked to the thread that forked it (lockForChild) until the helper is
// reaped, whether it ran a call or died parked. A helper leaves parked
// exactly once, to one call (handed) or to the discard.
type pool struct {
	e    *Executor
	size int

	mu       sync.Mutex
	parked   []*proc // ready, oldest first
	starting int     // owners started whose helper is not parked yet
	fails    int     // consecutive failed starts
	started  bool    // the refill goroutine runs (from the first take)
	closed   bool

	kick chan struct{} // cap 1: the pool may be short
	stop chan struct{} // closed by close
}

func newPool(e *Executor, size int) *pool {
	return &pool{e: e, size: size, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// eligible reports whether a call with hc may run in a pooled helper:
// one in namespaces without network, whose clone flags pooled helpers
// share (a network tool's helper has no network namespace and gets the
// egress guard's socket per call).
func eligible(hc *helperConfig) bool {
	return hc.Namespaces && !hc.Network && !hc.EgressGuard
}

// take hands out one parked helper that is still alive, or nil (the
// caller then starts one as without a pool). The first take starts the
// refill goroutine, so an executor never used parks nothing.
func (pl *pool) take(hc *helperConfig) *proc {
	if pl == nil || !eligible(hc) {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return nil
	}
	if !pl.started {
		pl.started = true
		pl.e.waiters.Go(pl.refill)
	}
	defer pl.signal()
	for len(pl.parked) > 0 {
		p := pl.parked[0]
		pl.parked = slices.Delete(pl.parked, 0, 1)
		p.handed = true
		if p.alive() {
			return p
		}
		// Dead or dying: never handed a call. Its owner closes its files
		// once it is reaped; make sure it goes.
		p.handed = false
		pl.e.kill(p.cmd.Process)
	}
	return nil
}

func (pl *pool) signal() {
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// parkedPIDs lists the parked helpers' pids (for tests).
func (pl *pool) parkedPIDs() []int {
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pids := make([]int, 0, len(pl.parked))
	for _, p := range pl.parked {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// close stops the refill goroutine; the executor's Close kills the
// parked helpers with every other running process.
func (pl *pool) close() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if !pl.closed {
		pl.closed = true
		close(pl.stop)
	}
}

// reserve counts one more start if the pool is short.
func (pl *pool) reserve() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || len(pl.parked)+pl.starting >= pl.size {
		return false
	}
	pl.starting++
	return true
}

// refill starts an owner for every missing helper whenever kicked,
// until close, one start at a time: the next start begins once the
// previous helper has parked or its start has failed (and backed off),
// so a refill never has more than one fork and Go runtime start in
// flight beside the worker's own goroutines.
func (pl *pool) refill() {
	for {
		select {
		case <-pl.stop:
			return
		case <-pl.kick:
		}
		for pl.reserve() {
			settled := make(chan struct{})
			pl.e.waiters.Go(func() { pl.own(settled) })
			select {
			case <-pl.stop:
				return
			case <-settled:
			}
		}
	}
}

// own starts one helper and owns it until it is reaped; a failed start
// keeps its place for a back-off before the pool tries again. It closes
// settled once the helper has parked, or once a failed start has
// backed off.
func (pl *pool) own(settled chan<- struct{}) {
	err := pl.keep(settled)
	if err == nil {
		return
	}
	defer close(settled)
	pl.mu.Lock()
	pl.fails++
	wait := min(retryWait<<min(pl.fails-1, 6), maxRetryWait)
	closed := pl.closed
	pl.mu.Unlock()
	if !closed {
		pl.e.log.Warn("sandbox: cannot start a pooled helper", "err", err, "retry_in", wait)
		select {
		case <-pl.stop:
		case <-time.After(wait):
		}
	}
	pl.mu.Lock()
	pl.starting--
	pl.mu.Unlock()
	pl.signal()
}

// keep starts a helper from a thread locked until the helper is reaped,
// parks it once it reports ready, and when it is gone discards it
// unless a call took it (that call then closes its pipes). It returns
// the error of a start that failed, nil once the helper is gone. It
// closes settled once the helper has parked (or, the pool being closed,
// been killed instead), never on an error.
func (pl *pool) keep(settled chan<- struct{}) error {
	defer lockForChild()()
	p, err := pl.e.launch(launchOpts{stdin: true, parked: true})
	if err != nil {
		return err
	}
	if err := awaitReady(p); err != nil {
		pl.e.kill(p.cmd.Process)
		<-p.done
		p.closeAll()
		return err
	}
	pl.mu.Lock()
	pl.starting--
	pl.fails = 0
	closed := pl.closed
	if !closed {
		pl.parked = append(pl.parked, p)
	}
	pl.mu.Unlock()
	close(settled)
	if closed {
		pl.e.kill(p.cmd.Process)
	}
	<-p.done
	pl.mu.Lock()
	handed := p.handed
	if i := slices.Index(pl.parked, p); i >= 0 {
		pl.parked = slices.Delete(pl.parked, i, i+1)
	}
	pl.mu.Unlock()
	if !handed {
		p.closeAll()
		pl.signal()
	}
	return nil
}

// awaitReady reads the helper's ready byte, bounded by readyWait.
func awaitReady(p *proc) error {
	if err := p.status.SetReadDeadline(time.Now().Add(readyWait)); err != nil {
		return fmt.Errorf("sandbox: pooled helper: %w", err)
	}
	var b [1]byte
	n, err := p.status.Read(b[:])
	if n == 1 && b[0] == readyByte {
		return p.status.SetReadDeadline(time.Time{})
	}
	if err == nil {
		err = fmt.Errorf("unexpected byte %q", b[0])
	}
	return fmt.Errorf("sandbox: pooled helper %d did not report ready: %w", p.cmd.Process.Pid, err)
}

// alive reports whether the helper has not exited: its waiter has not
// seen it end, and it is no zombie awaiting that waiter (waitid without
// reaping).
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// closeAll closes the parent's ends of every pipe of a helper no call
// took.
func (p *proc) closeAll() {
	for _, f := range []*os.File{p.config, p.stdin, p.status, p.stdout, p.stderr} {
		if f != nil {
			_ = f.Close()
		}
	}
}
