package limitgate_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (the renewal, the releases) has ended when
// the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
