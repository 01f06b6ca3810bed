package faulttest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/faulttest"
)

// TestMain ends the processes the tests started, then checks that no
// goroutine of the test process is left behind (after a passing run only:
// a failed test may leave its harness's goroutines, and its failure is
// the report that matters).
func TestMain(m *testing.M) {
	code := m.Run()
	faulttest.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
