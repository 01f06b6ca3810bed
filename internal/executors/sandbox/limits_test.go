//go:build linux

package sandbox_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Each bomb is stopped by its own limit, its message names the limit, and
// the executor still works afterwards.
func TestLimits(t *testing.T) {
	e := setup(t)
	need(t, e, sandbox.MechUserNS, sandbox.MechTmpfs)
	// Each bomb runs under a wall-time limit of 20 s, so an end well before
	// that (and a message naming the limit) shows its own limit stopped
	// it. The bound is on what the test checks, not on the host's speed:
	// on an idle host these end in 0.1-1.4 s, on a loaded 2-core CI
	// machine they took up to 2 s.
	const slack = 10 * time.Second

	t.Run("fork bomb", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("forkbomb"), withLimits(&toolwirev1.SandboxLimits{Processes: 24, WallTime: wall(20 * time.Second)})), `{}`)
		require.Less(t, time.Since(start), slack)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
		require.Contains(t, te.Message, "exit code 3")
		require.Contains(t, te.Message, "resource temporarily unavailable", "fork failed with EAGAIN at the process limit")
		stillWorks(t, e)
	})
	t.Run("memory bomb", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("membomb"), withLimits(&toolwirev1.SandboxLimits{MemoryBytes: 256 << 20, WallTime: wall(20 * time.Second)})), `{}`)
		require.Less(t, time.Since(start), slack)
		require.Contains(t, te.Message, "memory limit")
		stillWorks(t, e)
	})
	t.Run("cpu spin", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("spin"), withLimits(&toolwirev1.SandboxLimits{CpuSeconds: 1, WallTime: wall(20 * time.Second)})), `{}`)
		// The limit is CPU time; on two loaded cores the spinner may get
		// less than one, so real time is bounded loosely and CPU time
		// tightly.
		require.Less(t, time.Since(start), 5*time.Second)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type, te.Message)
		m := regexp.MustCompile(`cpu limit of 1s exceeded \(used ([0-9.]+m?s)\)`).FindStringSubmatch(te.Message)
		require.NotNil(t, m, te.Message)
		used, err := time.ParseDuration(m[1])
		require.NoError(t, err)
		require.Less(t, used, 1500*time.Millisecond)
		stillWorks(t, e)
	})
	t.Run("wall time", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("sleep"), withLimits(&toolwirev1.SandboxLimits{WallTime: wall(300 * time.Millisecond)})), `{}`)
		require.Less(t, time.Since(start), 300*time.Millisecond+slack)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, te.Type)
		require.Contains(t, te.Message, "wall time limit of 300ms exceeded")
		stillWorks(t, e)
	})
	t.Run("1 GB on stdout", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		got := text(t, e, spec(fixture("flood"), withLimits(&toolwirev1.SandboxLimits{OutputBytes: 1 << 20, WallTime: wall(20 * time.Second)})), `{}`)
		require.Less(t, time.Since(start), slack)
		require.Equal(t, strings.Repeat("y", 1<<20), got[:1<<20])
		require.Contains(t, got[1<<20:], "truncated")
		require.Less(t, len(got), 1<<20+200)
		stillWorks(t, e)
	})
	t.Run("full /tmp", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("filltmp")), `{}`)
		require.Less(t, time.Since(start), slack)
		require.Contains(t, te.Message, "exit code 5")
		// The tmpfs size and RLIMIT_FSIZE are the same 64 MiB: whichever
		// answers first, the write stops there.
		require.Regexp(t, `wrote 6710886[0-9]: .*(no space left on device|file too large)`, te.Message)
		stillWorks(t, e)
	})
	t.Run("fd exhaustion", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		te := failure(t, e, spec(fixture("fds"), withLimits(&toolwirev1.SandboxLimits{OpenFiles: 64})), `{}`)
		require.Less(t, time.Since(start), slack)
		require.Contains(t, te.Message, "exit code 4")
		require.Contains(t, te.Message, "too many open files")
		stillWorks(t, e)
	})
}
