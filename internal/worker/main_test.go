package worker_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// Every goroutine a test starts — the worker's, the embedded servers',
// the connections' — has ended when the package's tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }
