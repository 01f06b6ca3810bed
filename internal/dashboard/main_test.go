package dashboard

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts has ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
