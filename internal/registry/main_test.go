package registry_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// Every goroutine a test starts has ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }
