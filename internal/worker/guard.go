package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
)

// Pool consumers put back.
//
// A pool's consumer is the worker's declared configuration (EnsurePool
// from the Pool's settings and its tools' subjects). Anyone with every
// permission on NATS (the nats CLI with the dispatcher's credentials) can
// still change it or delete it; the worker would then fetch from nothing,
// or deliver each call fewer times than declared. So the guard compares
// the live consumer of every pool the worker serves with the declared one
// every Config.ConsumerCheck, and at once when a fetch says the consumer
// is gone, and puts back any difference with EnsurePool, logged at warn.
// Ready fails meanwhile.

// declaredPool is what a served pool's consumer should be: the pool
// settings EnsurePool was given, and the consumer configuration it made.
type declaredPool struct {
	pool     bus.PoolConfig
	consumer jetstream.ConsumerConfig
}

// errConsumerMissing says a pool's consumer does not exist.
var errConsumerMissing = errors.New("missing")

// guard checks the pool consumers until ctx or stop ends.
func (w *Worker) guard(ctx, stop context.Context) {
	tick := time.NewTicker(w.cfg.ConsumerCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop.Done():
			return
		case <-tick.C:
		case <-w.checkNow:
		}
		w.repairConsumers(stop)
	}
}

// checkConsumers asks the guard to check the consumers now.
func (w *Worker) checkConsumers() {
	select {
	case w.checkNow <- struct{}{}:
	default:
	}
}

// consumerGone reports whether a fetch error says the pool's consumer is
// not there (deleted under a pull request, or no longer answering one).
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// repairConsumers puts back every served pool's consumer that is missing
// or differs from its declared configuration (under w.mu, so never while
// the specs are served again).
func (w *Worker) repairConsumers(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	for name, d := range w.declared {
		if !w.serving[name] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		w.repairConsumer(cctx, d)
		cancel()
	}
}

// repairConsumer puts back one pool's consumer if it must.
func (w *Worker) repairConsumer(ctx context.Context, d declaredPool) {
	consumer := w.bus.Config.PoolConsumer(d.pool.Name)
	diff, err := w.consumerDrift(ctx, d)
	switch {
	case errors.Is(err, errConsumerMissing):
		w.log.WarnContext(ctx, "pool consumer missing: re-created with its declared configuration (calls queued while it was missing are dead-lettered by the orphan sweeper)",
			"pool", d.pool.Name, "consumer", consumer)
	case err != nil:
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "pool consumer not checked", "pool", d.pool.Name, "consumer", consumer, "err", err)
		}
		return
	case len(diff) == 0:
		return
	default:
		w.log.WarnContext(ctx, "pool consumer differs from its declared configuration: put back", "pool", d.pool.Name,
			"consumer", consumer, "changed", strings.Join(diff, "; "))
	}
	cons, err := w.bus.EnsurePool(ctx, d.pool)
	if err != nil {
		w.log.ErrorContext(ctx, "pool consumer not put back; trying again", "pool", d.pool.Name, "consumer", consumer, "err", err)
		return
	}
	d.consumer = cons.CachedInfo().Config
	w.declared[d.pool.Name] = d
}

// consumerDrift returns how the live consumer of d's pool differs from
// the declared one, or an error matching errConsumerMissing.
func (w *Worker) consumerDrift(ctx context.Context, d declaredPool) ([]string, error) {
	cons, err := w.bus.Calls.Consumer(ctx, w.bus.Config.PoolConsumer(d.pool.Name))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, errConsumerMissing
	}
	if err != nil {
		return nil, err
	}
	return bus.PoolDrift(cons.CachedInfo().Config, d.consumer), nil
}

// consumerReady is Ready's check of one served pool's consumer.
func (w *Worker) consumerReady(ctx context.Context, d declaredPool) error {
	name := w.bus.Config.PoolConsumer(d.pool.Name)
	diff, err := w.consumerDrift(ctx, d)
	if err != nil {
		return fmt.Errorf("pool consumer %s: %w", name, err)
	}
	if len(diff) > 0 {
		return fmt.Errorf("pool consumer %s differs from its declared configuration: %s", name, strings.Join(diff, "; "))
	}
	return nil
}
