//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			k, _ := strconv.Atoi(d.Name())
			kids = append(kids, k)
		}
	}
	return kids
}

// aloneEnv marks the test binary that TestNoOrphans runs again for
// itself alone.
const aloneEnv = "SANDBOX_TEST_ALONE"

// TestNoOrphans makes 1,000 calls whose tools each leave a detached
// process behind (a new session, so no process group kill would reach
// it), some of them cancelled or timed out while running, through an
// executor with a helper pool; afterwards no process of any of them is
// left, and once the executor is closed the process that made the calls
// has no child at all: Close killed and reaped the parked helpers too.
//
// The calls run in the test binary started again for this test alone,
// with a copy of the fixture of its own: in this process the shared
// executors' parked helpers and the sandboxes of tests running in
// parallel are children too, and run the same fixture.
func TestNoOrphans(t *testing.T) {
	if os.Getenv(aloneEnv) != "" {
		noOrphans(t)
		return
	}
	t.Parallel()
	need(t, setup(t), sandbox.MechUserNS)
	runAlone(t, "TestNoOrphans")
}

// runAlone runs the test binary again for the test name alone, with a
// copy of the fixture, and requires that the test passed there.
func runAlone(t *testing.T, name string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandbox-alone-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // the sandbox user traverses it
	fix := filepath.Join(dir, "fixture")
	b, err := os.ReadFile(fixtureBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fix, b, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	args := []string{"-test.run=^" + name + "$", "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).String())
	}
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(os.Environ(), aloneEnv+"=1", fixtureEnv+"="+fix)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: "+name+" ", "%s", out)
}

// noOrphans is TestNoOrphans in the process that runs it alone.
func noOrphans(t *testing.T) {
	e, err := sandbox.New(sandbox.Config{HelperPool: 4})
	require.NoError(t, err)
	closeExecutor := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return e.Close(ctx)
	}
	t.Cleanup(func() { _ = closeExecutor() }) // when the test fails before its Close
	need(t, e, sandbox.MechUserNS)

	marker := fmt.Sprintf("%d.25", 800000+rand.IntN(99999))
	orphan := spec(fixture("orphan"))
	block := spec([]string{"/usr/bin/sleep", marker})

	const calls = 1000
	var ok, stopped atomic.Int64
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if i%50 == 0 { // stopped by the caller while running
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
				defer cancel()
				_, err := call(ctx, e, block, `{}`)
				if errors.Is(err, context.DeadlineExceeded) {
					stopped.Add(1)
				} else {
					t.Errorf("call %d: want a deadline error, got %v", i, err)
				}
				return
			}
			res, err := call(t.Context(), e, orphan, `{}`)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if got := res.Content[0].GetText().GetText(); !strings.HasPrefix(got, "left ") {
				t.Errorf("call %d: the tool did not leave a process behind: %q", i, got)
				return
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	require.EqualValues(t, calls-calls/50, ok.Load())
	require.EqualValues(t, calls/50, stopped.Load())

	// The sandbox is gone when Execute returns: no polling needed.
	require.Empty(t, processesMatching(fixtureBin+"\x00"), "fixture processes left behind")
	require.Empty(t, processesMatching("/usr/bin/sleep\x00"+marker+"\x00"), "blocked processes left behind")

	// Close with the pool full: the parked helpers are children of this
	// process until Close has killed and reaped them.
	parked := waitParked(t, e, 4)
	require.Subset(t, childrenOf(os.Getpid()), parked)
	require.NoError(t, closeExecutor())
	require.Empty(t, childrenOf(os.Getpid()), "child processes left behind after Close")
}

// TestClose kills running sandboxes and refuses new calls.
func TestClose(t *testing.T) {
	t.Parallel()
	e, err := sandbox.New(sandbox.Config{})
	require.NoError(t, err)
	need(t, e, sandbox.MechUserNS)
	marker := fmt.Sprintf("%d.75", 700000+rand.IntN(99999))
	done := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), e, spec([]string{"/usr/bin/sleep", marker}), `{}`)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesMatching("/usr/bin/sleep\x00"+marker+"\x00")) == 0 {
		require.True(t, time.Now().Before(deadline), "the sleeper never started")
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	require.Error(t, <-done)
	require.Empty(t, processesMatching("/usr/bin/sleep\x00"+marker+"\x00"))
	te := failure(t, e, spec([]string{"/bin/true"}), `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type)
}

// TestThreadExitsDoNotKillSandboxes runs sandboxes while other goroutines
// lock their threads and end, which makes the Go runtime end those
// threads. The helper's parent-death signal is sent when the thread that
// forked it ends (go.dev/issue/27505), not the worker process, so a
// sandbox forked from a thread that a tool's goroutine later ends this way
// was killed mid-call ("process crashed: killed by SIGKILL", seen in CI).
func TestThreadExitsDoNotKillSandboxes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	need(t, e, sandbox.MechUserNS)

	stop := make(chan struct{})
	var killers sync.WaitGroup
	killers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				runtime.LockOSThread() // never unlocked: the runtime ends the thread
			}()
			<-ended
		}
	})
	const calls = 40
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range calls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := call(t.Context(), e, spec([]string{"/usr/bin/sleep", "0.2"}), `{}`); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	killers.Wait()
}
