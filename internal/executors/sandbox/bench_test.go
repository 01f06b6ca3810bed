//go:build linux

package sandbox_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// BenchmarkSpawnTrue is one sandboxed call of /bin/true at a time with
// the default helper pool: a parked helper's mounts, Landlock, seccomp,
// exec, wait and teardown, while the pool starts its successor.
func BenchmarkSpawnTrue(b *testing.B) {
	e := setup(&testing.T{})
	s := spec([]string{"/bin/true"})
	ctx := context.Background()
	for b.Loop() {
		if _, err := call(ctx, e, s, `{}`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnTrueNoPool is BenchmarkSpawnTrue with the helper pool
// off: every call starts its helper.
func BenchmarkSpawnTrueNoPool(b *testing.B) {
	e, err := sandbox.New(sandbox.Config{HelperPool: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	s := spec([]string{"/bin/true"})
	ctx := context.Background()
	for b.Loop() {
		if _, err := call(ctx, e, s, `{}`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareExecTrue is the baseline: os/exec of /bin/true.
func BenchmarkBareExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSpawnTrueNetwork(b *testing.B) {
	e := setupNet(&testing.T{})
	s := spec([]string{"/bin/true"}, func(sc *toolwirev1.SandboxConfig) { sc.Network = true })
	ctx := context.Background()
	for b.Loop() {
		if _, err := call(ctx, e, s, `{}`); err != nil {
			b.Fatal(err)
		}
	}
}
