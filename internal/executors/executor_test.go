package executors_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
)

// Every goroutine a test starts has ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// An executor that holds nothing (not a Closer) is closed as a no-op.
func TestCloseWithoutCloser(t *testing.T) {
	t.Parallel()
	e := executors.Func(func(context.Context, *executors.Request) (*tool.Result, error) { return &tool.Result{}, nil })
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := executors.Close(ended, e); err != nil {
		t.Fatalf("Close of an executor without resources: %v", err)
	}
}
