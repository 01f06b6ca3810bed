package skills_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; the check keeps it so.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
