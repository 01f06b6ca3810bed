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
// A worker creates no consumer: it asks the dispatchers for its pool's
// (ensurePool: registry.OpEnsure on its pool's subject), which check that
// the subjects are the pool's own tools' and run bus.EnsurePool; then it
// looks the consumer up by name. Its credentials may look up, fetch from
// and settle only its pool's consumers (bus.PoolRole).
//
// A pool's consumer is the worker's declared configuration (EnsurePool
// from the Pool's settings and its tools' subjects), stamped in its
// metadata (bus.PoolStampKey). Anyone with every permission on NATS (the
// nats CLI with the dispatcher's credentials) can still change it or
// delete it; the worker would then fetch from nothing, or deliver each
// call fewer times than declared. So the guard checks the live consumer
// of every pool the worker serves every Config.ConsumerCheck, and at once
// when a fetch says the consumer is gone (bus.CheckPool), and puts back,
// logged at warn, a missing consumer or one changed by hand (settings
// that no longer match its stamp, a declared filter missing); Ready fails
// meanwhile. A consumer that holds another replica's whole declaration
// (a rolling upgrade that changes AckWait or MaxDeliver) is left as it
// is: reported at warn once per declaration, and Ready does not fail for
// it. The checks run outside w.mu; only a repair takes it.

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

// repairConsumers checks every served pool's consumer, and puts back
// one that is missing or was changed by hand.
func (w *Worker) repairConsumers(ctx context.Context) {
	for _, d := range w.servedPools() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		w.repairConsumer(cctx, d)
		cancel()
	}
}

// servedPools are the declarations of the pools served now; none once
// the worker is stopped.
func (w *Worker) servedPools() []declaredPool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	var out []declaredPool
	for name, d := range w.declared {
		if w.serving[name] {
			out = append(out, d)
		}
	}
	return out
}

// repairConsumer checks one pool's consumer and puts it back if it must.
func (w *Worker) repairConsumer(ctx context.Context, d declaredPool) {
	consumer := w.bus.Config.PoolConsumer(d.pool.Name)
	check, err := w.checkConsumer(ctx, d)
	switch {
	case errors.Is(err, errConsumerMissing):
		w.log.WarnContext(ctx, "pool consumer missing: re-created with its declared configuration (calls queued while it was missing are dead-lettered by the orphan sweeper)",
			"pool", d.pool.Name, "consumer", consumer)
	case err != nil:
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "pool consumer not checked", "pool", d.pool.Name, "consumer", consumer, "err", err)
		}
		return
	case len(check.Edited) == 0:
		w.reportForeign(ctx, d.pool.Name, check.Foreign)
		return
	default:
		w.log.WarnContext(ctx, "pool consumer differs from its declared configuration: put back", "pool", d.pool.Name,
			"consumer", consumer, "changed", strings.Join(check.Edited, "; "))
	}
	w.putBack(ctx, d.pool.Name)
}

// putBack makes pool's consumer its declared configuration again, under
// w.mu: with the newest declaration (specs served again meanwhile may
// have added subjects), never at the same time as the specs are served.
func (w *Worker) putBack(ctx context.Context, pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.declared[pool]
	if w.stopped || !ok {
		return
	}
	cons, err := w.ensurePool(ctx, Pool{PoolConfig: d.pool})
	if err != nil {
		w.log.ErrorContext(ctx, "pool consumer not put back; trying again", "pool", pool,
			"consumer", w.bus.Config.PoolConsumer(pool), "err", err)
		return
	}
	d.consumer = cons.CachedInfo().Config
	w.declared[pool] = d
}

// reportForeign logs, once per declaration, that pool's consumer holds
// another worker's declaration (foreign; nil = this worker's own). It
// runs on the guard's goroutine only, which owns w.foreign.
func (w *Worker) reportForeign(ctx context.Context, pool string, foreign *bus.Declaration) {
	if foreign == nil {
		delete(w.foreign, pool)
		return
	}
	if w.foreign[pool] == foreign.Stamp {
		return
	}
	w.foreign[pool] = foreign.Stamp
	w.log.WarnContext(ctx, "pool consumer holds another worker's declaration; left as it is", "pool", pool,
		"consumer", w.bus.Config.PoolConsumer(pool), "declared_by", foreign.By,
		"differs", strings.Join(foreign.Differs, "; "))
}

// ensurePool has the dispatchers (or the in-process Registrar) create or
// update p's consumer, and looks it up.
func (w *Worker) ensurePool(ctx context.Context, p Pool) (jetstream.Consumer, error) {
	name, err := w.writerOf(p).Ensure(ctx, p.PoolConfig)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cons, err := w.bus.Calls.Consumer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("worker: pool %q: consumer %s: %w", p.Name, name, err)
	}
	return cons, nil
}

// checkConsumer compares the live consumer of d's pool with d (CheckPool),
// or returns an error matching errConsumerMissing.
func (w *Worker) checkConsumer(ctx context.Context, d declaredPool) (bus.PoolCheck, error) {
	cons, err := w.bus.Calls.Consumer(ctx, w.bus.Config.PoolConsumer(d.pool.Name))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return bus.PoolCheck{}, errConsumerMissing
	}
	if err != nil {
		return bus.PoolCheck{}, err
	}
	return bus.CheckPool(cons.CachedInfo().Config, d.consumer), nil
}

// consumerReady is Ready's check of one served pool's consumer: missing
// or changed by hand fails it; another worker's declaration does not.
func (w *Worker) consumerReady(ctx context.Context, d declaredPool) error {
	name := w.bus.Config.PoolConsumer(d.pool.Name)
	check, err := w.checkConsumer(ctx, d)
	if err != nil {
		return fmt.Errorf("pool consumer %s: %w", name, err)
	}
	if len(check.Edited) > 0 {
		return fmt.Errorf("pool consumer %s differs from its declared configuration: %s", name, strings.Join(check.Edited, "; "))
	}
	return nil
}
