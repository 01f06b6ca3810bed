package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Codes of the server's JetStream API errors that say the cluster cannot
// answer now but may soon (nats-server's jetstream_errors_generated.go).
const (
	jsClusterNoPeers   = 10005 // too few servers up for the replicas asked
	jsClusterNotAvail  = 10008 // JetStream system temporarily unavailable: no meta leader
	jsClusterNotLeader = 10009 // asked a server that is no longer the leader
	jsStreamOffline    = 10118 // the stream has no leader
)

// Unavailable reports whether err says the server or the cluster cannot
// answer now but may soon: no server reachable yet, a request that timed
// out or found no responder (a cluster with no JetStream leader), or
// JetStream saying it is unavailable, not enabled yet, without enough
// peers or without a stream leader. A caller that is starting up waits
// and tries again; other errors (credentials refused, a bad layout, a
// refused pool) are final. An error of the caller's own ended context is
// not Unavailable.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsClusterNoPeers, jsClusterNotAvail, jsClusterNotLeader, jsStreamOffline, jetstream.JSErrCodeJetStreamNotEnabled:
			return true
		}
	}
	for _, target := range []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders, nats.ErrNoServers,
		jetstream.ErrNoStreamResponse, jetstream.ErrServerShutdown, jetstream.ErrJetStreamNotEnabled, nats.ErrConnectionReconnecting} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
