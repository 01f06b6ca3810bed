//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Without user namespaces the executor still runs tools, with Landlock,
// seccomp and rlimits, as another uid, in an on-disk working directory
// that is removed afterwards — and it says so.
func TestWithoutNamespaces(t *testing.T) {
	t.Parallel()
	workDir, err := os.MkdirTemp("", "sandbox-workdir-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(workDir) })
	require.NoError(t, os.Chmod(workDir, 0o755))
	e, err := sandbox.NewWithoutNamespaces(sandbox.Config{WorkDir: workDir})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	require.Subset(t, e.IsolationGaps(), []string{sandbox.MechUserNS, sandbox.MechProc, sandbox.MechTmpfs, sandbox.MechCgroup})
	require.NotContains(t, e.IsolationGaps(), sandbox.MechLandlock)

	_, err = sandbox.NewWithoutNamespaces(sandbox.Config{Require: []string{sandbox.MechUserNS}})
	require.ErrorContains(t, err, "required isolation missing on this host: userns")

	env := text(t, e, spec(fixture("env")), `{}`)
	require.Contains(t, env, "HOME="+workDir+"/call-")
	wantID := "65534 65534 []\n" // a root worker's sandbox runs as Config.UID/GID
	if os.Geteuid() != 0 {
		wantID = fmt.Sprintf("%d %d []\n", os.Getuid(), os.Getgid()) // the "setuid" gap
		require.Contains(t, e.IsolationGaps(), sandbox.MechSetuid)
	}
	require.Equal(t, wantID, text(t, e, spec(fixture("id")), `{}`))
	require.Contains(t, failure(t, e, spec(fixture("read", "--", "/etc/shadow")), `{}`).Message, "permission denied")
	text(t, e, spec(fixture("write", "--", "inside")), `{}`)
	te := failure(t, e, spec(fixture("write", "--", filepath.Join(workDir, "outside"))), `{}`)
	require.Contains(t, te.Message, "permission denied")

	start := time.Now()
	te = failure(t, e, spec(fixture("sleep"), withLimits(&toolwirev1.SandboxLimits{WallTime: wall(200 * time.Millisecond)})), `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, te.Type)
	require.Less(t, time.Since(start), 3*time.Second)

	entries, err := os.ReadDir(workDir)
	require.NoError(t, err)
	require.Empty(t, entries, "per-call working directories are removed")
}
