package mcpserver_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// Every goroutine a test starts (servers, progress relays, calls) has
// ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }
