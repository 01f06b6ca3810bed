//go:build linux

package sandbox_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// openDir makes a directory every user may enter and write, so only the
// sandbox stands between a tool and its files. It is outside /tmp, which
// the sandbox's own tmpfs hides entirely.
func openDir(t *testing.T) string {
	t.Helper()
	parent := "/var/tmp"
	if _, err := os.Stat(parent); err != nil {
		t.Skipf("no %s for a directory outside /tmp: %v", parent, err)
	}
	dir, err := os.MkdirTemp(parent, "sandbox-open-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	return dir
}

func TestIsolation(t *testing.T) {
	e := setup(t)
	need(t, e, sandbox.MechUserNS, sandbox.MechLandlock, sandbox.MechSeccomp, sandbox.MechProc)

	const secret = "s3cr3t-worker-value"
	t.Setenv("TOOLWIRE_TEST_SECRET", secret)
	t.Setenv("TOOLWIRE_TEST_ALLOWED", "visible")

	dir := openDir(t)
	creds := filepath.Join(dir, "nats.creds")
	require.NoError(t, os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----"), 0o644))
	readable := filepath.Join(dir, "readable.txt")
	require.NoError(t, os.WriteFile(readable, []byte("ok to read"), 0o644))

	t.Run("runs as nobody with no groups and no capabilities", func(t *testing.T) {
		require.Equal(t, "65534 65534 []\n", text(t, e, spec(fixture("id")), `{}`))
		status := text(t, e, spec([]string{"/bin/cat", "/proc/self/status"}), `{}`)
		for _, line := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "NSpid:\t1"} {
			require.Contains(t, status, line)
		}
	})
	t.Run("/etc/shadow", func(t *testing.T) {
		te := failure(t, e, spec(fixture("read", "--", "/etc/shadow")), `{}`)
		require.Contains(t, te.Message, "permission denied")
		te = failure(t, e, spec([]string{"/bin/cat", "/etc/shadow"}), `{}`)
		require.Contains(t, te.Message, "Permission denied")
	})
	t.Run("a credentials file readable by everyone", func(t *testing.T) {
		te := failure(t, e, spec(fixture("read", "--", creds)), `{}`)
		require.Contains(t, te.Message, "permission denied")
		// The same kind of file, listed in read_only_paths, is readable:
		// only the sandbox made the difference.
		got := text(t, e, spec(fixture("read", "--", readable), func(sc *toolwirev1.SandboxConfig) {
			sc.ReadOnlyPaths = append(sc.ReadOnlyPaths, readable)
		}), `{}`)
		require.Equal(t, "ok to read", got)
	})
	t.Run("the worker's environment", func(t *testing.T) {
		env := text(t, e, spec(fixture("env"), func(sc *toolwirev1.SandboxConfig) {
			sc.EnvAllow = []string{"TOOLWIRE_TEST_ALLOWED", "NOT_SET_ANYWHERE"}
			sc.Env = map[string]string{"FIXED": "1"}
		}), `{}`)
		require.Equal(t, "FIXED=1\nHOME=/tmp\nPATH=/usr/local/bin:/usr/bin:/bin\nTMPDIR=/tmp\nTOOLWIRE_TEST_ALLOWED=visible\n", env)

		procs := text(t, e, spec(fixture("procenv", strconv.Itoa(os.Getpid()))), `{}`)
		require.NotContains(t, procs, secret)
		require.Contains(t, procs, "pid 1: ", "the fixture is pid 1 of its own pid namespace")
		require.NotContains(t, procs, fmt.Sprintf("pid %d:", os.Getpid()), "the worker is not visible")
		te := failure(t, e, spec(fixture("read", "--", fmt.Sprintf("/proc/%d/environ", os.Getppid()))), `{}`)
		require.Contains(t, te.Message, "no such file or directory")
	})
	t.Run("writing outside the working directory", func(t *testing.T) {
		target := filepath.Join(dir, "written")
		te := failure(t, e, spec(fixture("write", "--", target)), `{}`)
		require.Contains(t, te.Message, "permission denied")
		_, err := os.Stat(target)
		require.ErrorIs(t, err, os.ErrNotExist)
		failure(t, e, spec(fixture("write", "--", "/usr/pwned")), `{}`)
		failure(t, e, spec(fixture("write", "--", "/dev/shm/pwned")), `{}`)
		// Inside the working directory, and in a listed writable path, it works.
		text(t, e, spec(fixture("write", "--", "/tmp/inside")), `{}`)
		text(t, e, spec(fixture("write", "--", target), func(sc *toolwirev1.SandboxConfig) { sc.WritablePaths = []string{dir} }), `{}`)
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		require.Equal(t, "pwned", string(b))
	})
	t.Run("paths under /tmp are bound into the sandbox's own /tmp", func(t *testing.T) {
		under, err := os.MkdirTemp("", "sandbox-under-tmp-")
		require.NoError(t, err)
		defer os.RemoveAll(under)
		require.NoError(t, os.Chmod(under, 0o777))
		text(t, e, spec(fixture("write", "--", filepath.Join(under, "out")), func(sc *toolwirev1.SandboxConfig) {
			sc.WritablePaths = []string{under}
		}), `{}`)
		b, err := os.ReadFile(filepath.Join(under, "out"))
		require.NoError(t, err)
		require.Equal(t, "pwned", string(b), "a writable path is the host's directory")
		te := failure(t, e, spec(fixture("write", "--", filepath.Join(under, "ro")), func(sc *toolwirev1.SandboxConfig) {
			sc.ReadOnlyPaths = append(sc.ReadOnlyPaths, under)
		}), `{}`)
		require.Contains(t, te.Message, "read-only file system")
		te = failure(t, e, spec(fixture("read", "--", filepath.Join(under, "out"))), `{}`)
		require.Contains(t, te.Message, "no such file or directory", "unlisted host paths under /tmp do not exist in the sandbox")
	})
	t.Run("UNIX sockets of daemons", func(t *testing.T) {
		listen := func(path string) {
			ln, err := net.Listen("unix", path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ln.Close() })
			require.NoError(t, os.Chmod(path, 0o777))
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_ = c.Close()
				}
			}()
		}
		if os.Geteuid() == 0 {
			inRun := fmt.Sprintf("/run/toolwire-sandbox-test-%d.sock", os.Getpid())
			listen(inRun)
			te := failure(t, e, spec(fixture("connect-unix", "--", inRun)), `{}`)
			require.Contains(t, te.Message, "no such file or directory", "/run is hidden")
		}
		elsewhere := filepath.Join(dir, "daemon.sock")
		listen(elsewhere)
		res, err := call(t.Context(), e, spec(fixture("connect-unix", "--", elsewhere)), `{}`)
		if slices.Contains(e.IsolationGaps(), sandbox.MechLandlockUnix) {
			require.NoError(t, err, "the reported landlock-unix gap: a socket outside /run and /tmp is reachable")
		} else {
			require.Error(t, err, "Landlock ABI 9 denies connecting: %v", res)
		}
	})
	t.Run("network", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		accepted := make(chan struct{}, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
				accepted <- struct{}{}
			}
		}()
		addr := ln.Addr().String()
		te := failure(t, e, spec(fixture("connect", "--", addr)), `{}`)
		require.Contains(t, te.Message, "operation not permitted")
		for _, a := range []string{"[::1]:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "1.1.1.1:443"} {
			failure(t, e, spec(fixture("connect", "--", a)), `{}`)
		}
		require.Empty(t, accepted)
		// With network on, the same tool reaches the listener: the test
		// can see a connection, so the refusals above are the sandbox's.
		text(t, setupNet(t), spec(fixture("connect", "--", addr), func(sc *toolwirev1.SandboxConfig) { sc.Network = true }), `{}`)
		select {
		case <-accepted:
		case <-time.After(time.Minute): // far below the package's timeout
			t.Fatal("the listener saw no connection")
		}
	})
}
