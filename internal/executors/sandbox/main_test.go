//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

// fixtureBin is the testdata/fixture program, built once for all tests
// (without the race detector, so it runs under small memory limits), in a directory
// the sandbox user may traverse.
var fixtureBin string

// fixtureEnv names a fixture built beforehand, used instead of building
// one.
const fixtureEnv = "SANDBOX_TEST_FIXTURE"

func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	dir, err := os.MkdirTemp("", "sandbox-fixture-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fixtureBin = filepath.Join(dir, "fixture")
		if prebuilt := os.Getenv(fixtureEnv); prebuilt != "" {
			// A fixture built beforehand, for runs as a user that cannot
			// build (to test an unprivileged worker), and for the test
			// binary TestNoOrphans runs again.
			fixtureBin = prebuilt
		} else {
			build := exec.Command("go", "build", "-o", fixtureBin, "./testdata/fixture")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build fixture: %v\n%s", err, out)
				return 2
			}
		}
		code := m.Run()
		for _, e := range []*sandbox.Executor{shared, sharedNet} {
			if e == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := e.Close(ctx)
			cancel()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}
		return code
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
