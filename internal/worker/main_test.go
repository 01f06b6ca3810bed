package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts — the worker's, the embedded servers',
// the connections' — has ended when the package's tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
