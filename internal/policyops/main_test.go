package policyops_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (the policy holders) has ended when the
// tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
