package callindex

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// Every goroutine a test starts (feeds, their consumers, the stacks) has
// ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// mustNew is New for tests: cfg must be valid.
func mustNew(tb testing.TB, cfg Config) *Index {
	tb.Helper()
	x, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}
