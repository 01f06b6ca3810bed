//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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

// parkedHelperCmdline is a pooled helper's command line until it execs.
const parkedHelperCmdline = "toolwire-sandbox-helper\x00parked\x00"

// childrenOf lists the pids whose parent is pid, but for helpers parked in
// a pool (the shared executors keep some until TestMain closes them).
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
		if cl, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); string(cl) == parkedHelperCmdline {
			continue
		}
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			k, _ := strconv.Atoi(d.Name())
			kids = append(kids, k)
		}
	}
	return kids
}

// TestNoOrphans makes 1,000 calls whose tools each leave a detached
// process behind (a new session, so no process group kill would reach
// it), some of them cancelled or timed out while running; afterwards no
// process of any of them is left.
func TestNoOrphans(t *testing.T) {
	t.Parallel()
	e := setup(t)
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
	require.Empty(t, childrenOf(os.Getpid()), "child processes of the test left behind")
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
