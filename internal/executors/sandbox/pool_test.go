//go:build linux

package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/logtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// poolExecutor is an executor of the test's own with a helper pool of n,
// closed when the test ends.
func poolExecutor(t *testing.T, n int) *sandbox.Executor {
	t.Helper()
	return poolExecutorWith(t, sandbox.Config{HelperPool: n})
}

// poolExecutorWith is poolExecutor with a config of the test's.
func poolExecutorWith(t *testing.T, cfg sandbox.Config) *sandbox.Executor {
	t.Helper()
	e, err := sandbox.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	need(t, e, sandbox.MechUserNS)
	return e
}

// waitParked waits until n helpers are parked and returns their pids.
func waitParked(t *testing.T, e *sandbox.Executor, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		pids = e.ParkedHelpers()
		return len(pids) == n
	}, time.Minute, 5*time.Millisecond, "the pool never held %d helpers", n)
	return pids
}

// gone reports whether no process has the pid.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// freshReport is what the fixture's "fresh" mode saw.
type freshReport struct {
	Pid       int      `json:"pid"`
	Tmp       []string `json:"tmp"`
	Cwd       string   `json:"cwd"`
	Nofile    uint64   `json:"nofile"`
	Nproc     uint64   `json:"nproc"`
	StdinLink string   `json:"stdin_link"`
	Stdin     string   `json:"stdin"`
}

// freshSpec runs the "fresh" mode with limits of its own, and with stdin
// from the "in" argument when withStdin.
func freshSpec(openFiles, processes int64, withStdin bool) *toolwirev1.ToolSpec {
	return spec(fixture("fresh", "--", "{mark}"), func(sc *toolwirev1.SandboxConfig) {
		sc.Limits = &toolwirev1.SandboxLimits{OpenFiles: openFiles, Processes: processes}
		if withStdin {
			sc.StdinArg = "in"
		}
	})
}

func fresh(t *testing.T, e *sandbox.Executor, s *toolwirev1.ToolSpec, args map[string]string) freshReport {
	t.Helper()
	var r freshReport
	require.NoError(t, json.Unmarshal([]byte(text(t, e, s, args)), &r))
	return r
}

// TestHelperPoolRunsEachHelperOnce makes calls of tools with different
// limits and stdin through a pool of two: each takes the oldest parked
// helper, which is gone when the call returns and never parked again,
// and each sees a sandbox of its own — pid 1 of its pid namespace (one
// whose init has exited takes no new process, so no earlier call ran
// there), a /tmp without the file every call leaves there as its working
// directory, the rlimits of its own spec, and its own stdin
// (/dev/null without input).
func TestHelperPoolRunsEachHelperOnce(t *testing.T) {
	t.Parallel()
	e := poolExecutor(t, 2)
	fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "first"}) // the first call starts the pool
	var used []int
	for i := range 6 {
		parked := waitParked(t, e, 2)
		require.Empty(t, slices.DeleteFunc(slices.Clone(parked), func(p int) bool { return !slices.Contains(used, p) }),
			"a helper that ran a call is parked again")
		openFiles, processes, withStdin := int64(32+16*i), int64(8+i), i%2 == 1
		args := map[string]string{"mark": strconv.Itoa(i)}
		if withStdin {
			args["in"] = fmt.Sprintf("input %d", i)
		}
		r := fresh(t, e, freshSpec(openFiles, processes, withStdin), args)
		require.Equal(t, 1, r.Pid, "call %d: not the init of a fresh pid namespace", i)
		require.NotContains(t, r.Tmp, "mark", "call %d: /tmp is not fresh", i) // the fixture's directory is bound back
		require.Equal(t, "/tmp", r.Cwd)
		require.EqualValues(t, openFiles, r.Nofile, "call %d: RLIMIT_NOFILE", i)
		require.EqualValues(t, processes, r.Nproc, "call %d: RLIMIT_NPROC", i)
		if withStdin {
			require.Equal(t, args["in"], r.Stdin)
			require.Contains(t, r.StdinLink, "pipe:")
		} else {
			require.Equal(t, "/dev/null", r.StdinLink)
			require.Empty(t, r.Stdin)
		}
		// The oldest parked helper ran this call and is gone.
		require.NotContains(t, e.ParkedHelpers(), parked[0], "call %d", i)
		require.True(t, gone(parked[0]), "call %d: helper %d still exists after its call", i, parked[0])
		used = append(used, parked[0])
	}
}

// TestHelperPoolDiscardsDeadHelpers kills parked helpers: a call made at
// once still succeeds in a sandbox of its own (the dead helper is never
// handed the call, or, killed while being handed it, is replaced before
// the call starts), and the pool drops the dead and fills up again.
func TestHelperPoolDiscardsDeadHelpers(t *testing.T) {
	t.Parallel()
	e := poolExecutor(t, 2)
	fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "first"})
	for round := range 3 {
		parked := waitParked(t, e, 2)
		killed := parked[:1+round%2] // one, then both
		for _, pid := range killed {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		}
		r := fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "after a kill"})
		require.Equal(t, 1, r.Pid)
		require.NotContains(t, r.Tmp, "mark")
		require.Eventually(t, func() bool {
			now := e.ParkedHelpers()
			return len(now) == 2 && !slices.ContainsFunc(killed, func(p int) bool { return slices.Contains(now, p) })
		}, time.Minute, 5*time.Millisecond, "round %d: the pool kept a killed helper or did not refill", round)
		for _, pid := range killed {
			require.True(t, gone(pid), "killed helper %d was not reaped", pid)
		}
	}
}

// TestHelperPoolReplacesAHelperLostInHandOver kills the parked helper a
// call has taken, after the take and before the call is sent to it: the
// helper ends without reading the call, and the call runs in a helper
// started for it (pid 1 of a fresh pid namespace, a fresh /tmp), with the
// loss logged. Without the retry the call would fail.
func TestHelperPoolReplacesAHelperLostInHandOver(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	e := poolExecutorWith(t, sandbox.Config{HelperPool: 2, Logger: logs.JSONLogger()})
	killed := make(chan int, 1)
	e.KillNextTakenHelper(killed)
	fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "first"}) // starts the pool; nothing parked to take
	require.Empty(t, killed, "the first call took a parked helper")
	parked := waitParked(t, e, 2)

	r := fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "after the loss"})
	require.Equal(t, 1, r.Pid, "not the init of a fresh pid namespace")
	require.NotContains(t, r.Tmp, "mark", "/tmp is not fresh")
	require.Equal(t, "/tmp", r.Cwd)
	var lost int
	select {
	case lost = <-killed:
	default:
		require.FailNow(t, "the call took no parked helper")
	}
	require.Equal(t, parked[0], lost, "the call did not take the oldest parked helper")
	require.NotContains(t, e.ParkedHelpers(), lost)
	require.True(t, lostLogged(t, logs.String(), lost), "no warning of the lost helper %d in the log:\n%s", lost, logs.String())
}

// lostLogged reports whether logs (JSON lines) hold the executor's
// warning that the parked helper pid ended before its call.
func lostLogged(t *testing.T, logs string, pid int) bool {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Pid   int    `json:"pid"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q", line)
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "parked helper ended before its call") && rec.Pid == pid {
			return true
		}
	}
	return false
}

// TestHelperPoolCloseLeavesNoProcess: Close kills and reaps every parked
// helper (and stops the refill goroutine, which goleak checks in
// TestMain); calls afterwards are refused.
func TestHelperPoolCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	e, err := sandbox.New(sandbox.Config{HelperPool: 3})
	require.NoError(t, err)
	need(t, e, sandbox.MechUserNS)
	fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "first"})
	parked := waitParked(t, e, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	for _, pid := range parked {
		require.True(t, gone(pid), "parked helper %d outlived Close", pid)
	}
	require.Empty(t, e.ParkedHelpers())
	te := failure(t, e, freshSpec(0, 0, false), `{"mark":"late"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type)
}

// TestHelperPoolOff: with helper_pool -1 nothing is parked.
func TestHelperPoolOff(t *testing.T) {
	t.Parallel()
	e := poolExecutor(t, -1)
	for range 2 {
		require.Equal(t, 1, fresh(t, e, freshSpec(0, 0, false), map[string]string{"mark": "x"}).Pid)
	}
	require.Empty(t, e.ParkedHelpers())
}
