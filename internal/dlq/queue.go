package dlq

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// ErrNoInstallation is returned by Open when the server has no toolwire
// layout with the given prefix (a stream is missing):
// bus.ErrNoInstallation.
var ErrNoInstallation = bus.ErrNoInstallation

// Queue is the dead-letter queue of one installation. It is safe for
// concurrent use.
type Queue struct {
	js    jetstream.JetStream
	cfg   bus.Config
	subj  bus.Subjects
	dlq   jetstream.Stream
	calls jetstream.Stream
	// results holds the calls' results (Purge reads a call's).
	results jetstream.Stream
	// registry holds the spec versions whose schemas say which arguments
	// Shown redacts; nil when it cannot be read.
	registry jetstream.KeyValue
	schemas  schemas
	// signer signs the admission record of a retry (SignWith).
	signer *signing.Key
	// check decides whether a retry may run now (CheckWith); nil: none.
	check Check
}

// SignWith makes q sign what it writes into the record (a retry's
// admission record) with k, the dispatcher's key; it returns q.
func (q *Queue) SignWith(k *signing.Key) *Queue {
	q.signer = k
	return q
}

// Open attaches to the installation whose subjects and streams start with
// prefix ("" = the default, toolwire) on nc, which the caller keeps
// owning (bus.OpenView). It creates and changes nothing. It returns an
// error matching ErrNoInstallation when a stream is missing, or the error
// of reaching JetStream. The registry, which says what Shown redacts, is
// read when it can be (nil otherwise: Shown fails closed).
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Queue, error) {
	v, err := bus.OpenView(ctx, nc, prefix)
	if err != nil {
		return nil, err
	}
	return &Queue{js: v.JS, cfg: v.Config, subj: v.Subjects, dlq: v.DLQ, calls: v.Calls, results: v.Results, registry: v.Registry}, nil
}

// State is the DLQ stream's extent: its first and last sequences and how
// many letters it holds. It changes whenever a letter is written or
// removed, so a reader can tell whether a listing is still current from
// one stream info instead of reading every letter again.
type State struct {
	First, Last, Msgs uint64
}

// State returns the DLQ stream's extent now.
func (q *Queue) State(ctx context.Context) (State, error) {
	info, err := q.dlq.Info(ctx)
	if err != nil {
		return State{}, fmt.Errorf("dlq: stream info: %w", err)
	}
	return State{First: info.State.FirstSeq, Last: info.State.LastSeq, Msgs: info.State.Msgs}, nil
}
