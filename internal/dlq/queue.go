package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// ErrNoInstallation is returned by Open when the server has no toolwire
// layout with the given prefix (no DLQ or calls stream).
var ErrNoInstallation = errors.New("dlq: no toolwire installation")

// Queue is the dead-letter queue of one installation. It is safe for
// concurrent use.
type Queue struct {
	js    jetstream.JetStream
	cfg   bus.Config
	subj  bus.Subjects
	dlq   jetstream.Stream
	calls jetstream.Stream
	// registry holds the spec versions whose schemas say which arguments
	// Shown redacts; nil when it cannot be read.
	registry jetstream.KeyValue
	schemas  schemas
}

// Open attaches to the DLQ and calls streams of the installation whose
// subjects and streams start with prefix ("" = the default, toolwire) on
// nc, which the caller keeps owning. It creates and changes nothing. It
// returns an error matching ErrNoInstallation when a stream is missing,
// or the error of reaching JetStream.
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Queue, error) {
	cfg := bus.Config{Prefix: prefix}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("dlq: jetstream: %w", err)
	}
	q := &Queue{js: js, cfg: cfg, subj: cfg.Subjects()}
	for _, s := range []struct {
		dst  *jetstream.Stream
		name string
	}{{&q.dlq, cfg.DLQStream()}, {&q.calls, cfg.CallsStream()}} {
		st, err := js.Stream(ctx, s.name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w with prefix %q: stream %s not found", ErrNoInstallation, cfg.Prefix, s.name)
		}
		if err != nil {
			return nil, fmt.Errorf("dlq: stream %s: %w", s.name, err)
		}
		*s.dst = st
	}
	q.registry = openRegistry(ctx, js, cfg.RegistryBucket())
	return q, nil
}
