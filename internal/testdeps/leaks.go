package testdeps

import "go.uber.org/goleak"

// IgnoreNATS is the goleak option every package's TestMain passes: one
// of nats.go's own goroutines is left out. An async JetStream publish
// (the worker's progress, the dispatcher's calls) begun on a connection
// that is closing starts a watcher of its reconnects on a status channel
// the closed connection never made (nil), which blocks for good (nats.go
// v1.55.0, jetstream/publish.go, resetPendingAcksOnReconnect). Seen in
// CI runs of internal/api, internal/dispatch and internal/redact.
func IgnoreNATS() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")
}
