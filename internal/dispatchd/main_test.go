package dispatchd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsHelper() { // the default configuration's sandbox pool runs this binary
		sandbox.RunHelper()
	}
	goleak.VerifyTestMain(m)
}
