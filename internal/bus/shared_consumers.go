package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The durable consumers every dispatcher replica shares, so that each
// message is handled by one of them. Their names are the Config's
// (ReaperConsumer, MoverConsumer); a message whose handling fails is
// delivered again after AckWait, or sooner when the handler naks it.

// EnsureReaper creates or updates the reaper's consumer: every MaxDeliver
// advisory captured in the advisories stream, from the first one, acked
// explicitly within 30s, delivered for as long as it takes (MaxDeliver
// -1): an advisory dropped after failed attempts (a partition) left its
// call without an answer for good. The reaper spaces its retries itself
// (NakWithDelay).
func (b *Bus) EnsureReaper(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := b.Advisories.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       b.Config.ReaperConsumer(),
		Description:   "toolwire: dead-letters calls that exhausted MaxDeliver",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("bus: reaper consumer: %w", err)
	}
	return cons, nil
}

// EnsureMover creates or updates the retry mover's consumer: the due
// retries of the retries stream (Subjects.DueRetries), from the first
// one, acked explicitly within 30s, delivered for as long as it takes
// (MaxDeliver -1, set explicitly: a due retry dropped is a call lost).
func (b *Bus) EnsureMover(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := b.Retries.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       b.Config.MoverConsumer(),
		Description:   "toolwire: puts due retries back on the calls stream",
		FilterSubject: b.Subjects.DueRetries(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("bus: retry mover consumer: %w", err)
	}
	return cons, nil
}
