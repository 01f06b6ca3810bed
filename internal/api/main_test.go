package api_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (dispatchers, workers, servers, Watches)
// has ended when the tests have. One of nats.go's own is left out: an
// async publish begun on a connection that is closing starts a watcher of
// its reconnects on a status channel the closed connection never made
// (nil), which blocks for good (nats.go v1.55.0, jetstream/publish.go,
// resetPendingAcksOnReconnect); seen once in a CI run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
