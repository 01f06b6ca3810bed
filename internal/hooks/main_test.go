package hooks_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// The after-hook service's goroutines have ended when the tests have.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testdeps.IgnoreNATS())
}
