package dispatch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (dispatchers, workers, servers, Watches)
// has ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
