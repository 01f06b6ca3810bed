package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ScanInactive is the inactivity threshold of a Scan's server consumer:
// how long one outlives a process that died mid-scan. A live scan never
// comes near it, since each fetch makes a new consumer.
const ScanInactive = time.Minute

// scanDelete bounds deleting one consumer of a scan, also after the
// scan's context ended.
const scanDelete = 5 * time.Second

// Scan reads a stream once with an ordered consumer (an audit, a
// dead-letter listing) and leaves no consumer behind. Each fetch of an
// ordered consumer replaces its server consumer, and the library deletes
// the one replaced in a goroutine of its own that a command's exit cuts
// short; a Scan deletes each replaced consumer itself before the fetch
// returns, and the last one on Close. These are no pool's consumers
// (Config.IsPoolConsumer): they never block a pool, even while they last.
// A Scan is not safe for concurrent use.
type Scan struct {
	stream jetstream.Stream
	cons   jetstream.Consumer
	// name is the server consumer the last fetch read from; "" before the
	// first.
	name string
}

// NewScan returns a Scan of stream with cfg; an InactiveThreshold of 0 is
// ScanInactive.
func NewScan(ctx context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig) (*Scan, error) {
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = ScanInactive
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Scan{stream: stream, cons: cons}, nil
}

// Fetch is the ordered consumer's Fetch.
func (s *Scan) Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	b, err := s.cons.Fetch(batch, opts...)
	s.replaced()
	return b, err
}

// FetchNoWait is the ordered consumer's FetchNoWait.
func (s *Scan) FetchNoWait(batch int) (jetstream.MessageBatch, error) {
	b, err := s.cons.FetchNoWait(batch)
	s.replaced()
	return b, err
}

// Info is the ordered consumer's Info: its current server consumer.
func (s *Scan) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	return s.cons.Info(ctx)
}

// Close deletes the scan's current server consumer, also when the scan's
// context has ended. Idempotent. Its error is for a log line only: a
// consumer it could not delete goes after ScanInactive.
func (s *Scan) Close() error {
	name := s.name
	s.name = ""
	if name == "" {
		return nil
	}
	return s.delete(name)
}

// replaced deletes the server consumer a fetch replaced.
func (s *Scan) replaced() {
	info := s.cons.CachedInfo()
	if info == nil || info.Name == s.name {
		return
	}
	if s.name != "" {
		_ = s.delete(s.name) // the library deletes it too; ScanInactive at worst
	}
	s.name = info.Name
}

func (s *Scan) delete(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), scanDelete)
	defer cancel()
	// Not found: the library's own delete (or the threshold) came first.
	if err := s.stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("bus: delete scan consumer %s: %w", name, err)
	}
	return nil
}
