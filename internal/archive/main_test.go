package archive_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts has ended when the tests have. The one
// exception is not a test's: OpenCensus starts a worker when its package
// is initialised, linked into this test binary only (fake-gcs-server's
// notifications import Pub/Sub, which imports it), never into a binary
// of toolwire's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
