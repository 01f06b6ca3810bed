package dispatchd_test

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

// childArgs, when set in the environment, makes the test binary a
// dispatcher process (dispatchd.Main with these arguments, separated by
// unit separators): tests kill it with SIGKILL and start it again.
const childArgs = "TOOLWIRE_TEST_DISPATCHER_ARGS"

func TestMain(m *testing.M) {
	if sandbox.IsHelper() { // the default configuration's sandbox pool runs this binary
		sandbox.RunHelper()
	}
	if args, ok := os.LookupEnv(childArgs); ok {
		os.Exit(dispatchd.Main(strings.Split(args, "\x1f"), os.Stderr, nil))
	}
	goleak.VerifyTestMain(m, testdeps.IgnoreNATS())
}
