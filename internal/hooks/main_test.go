package hooks_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The after-hook service's goroutines have ended when the tests have.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
