package dispatchd_test

import (
	"os"
	"testing"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsHelper() { // the default configuration's sandbox pool runs this binary
		sandbox.RunHelper()
	}
	os.Exit(m.Run())
}
