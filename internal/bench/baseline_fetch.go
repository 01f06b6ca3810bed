package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// baseFetchWait matches the worker's default FetchWait.
const baseFetchWait = time.Second

// fetchWorker is jetstream-fetch's worker side, the first baseline's: the
// toolwire worker's loop (Fetch at most the free slots, a goroutine per
// call), each result published and its PubAck awaited before the ack.
type fetchWorker struct {
	b         *baseline
	stopFetch context.CancelFunc
	fetcher   sync.WaitGroup
	handlers  sync.WaitGroup
}

// startFetchWorker starts the fetch loop with concurrency slots.
func startFetchWorker(ctx context.Context, b *baseline, concurrency int) *fetchWorker {
	w := &fetchWorker{b: b}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.stopFetch = stop
	w.fetcher.Add(1)
	go w.fetchLoop(loopCtx, b.cons, concurrency)
	return w
}

// fetchLoop is the worker's consume loop: never more messages requested
// than free slots, one goroutine per message, and a stop waits for the
// current pull request to end.
func (w *fetchWorker) fetchLoop(ctx context.Context, cons jetstream.Consumer, concurrency int) {
	defer w.fetcher.Done()
	var inflight atomic.Int64
	freed := make(chan struct{}, 1)
	for ctx.Err() == nil {
		free := int64(concurrency) - inflight.Load()
		if free <= 0 {
			select {
			case <-freed:
			case <-ctx.Done():
			}
			continue
		}
		// Like the worker, never abandon a pull request: a stop waits for
		// it to end.
		fctx, cancel := context.WithTimeout(context.Background(), baseFetchWait)
		batch, err := cons.Fetch(int(free), jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() == nil {
				w.b.log.Warn("fetch failed", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		for msg := range batch.Messages() {
			inflight.Add(1)
			w.handlers.Add(1)
			go func() {
				defer func() {
					inflight.Add(-1)
					w.handlers.Done()
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
				w.handle(msg)
			}()
		}
		cancel()
	}
}

// handle publishes the result once, awaits its PubAck, then acks.
func (w *fetchWorker) handle(msg jetstream.Msg) {
	id, ok := w.b.callID(msg)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.b.workerJS.Publish(ctx, baseResultPrefix+id, w.b.p.result.with(id), jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		w.b.log.Error("publish result failed", "err", err)
		if err := msg.NakWithDelay(time.Second); err != nil {
			w.b.log.Error("nak failed", "err", err)
		}
		return
	}
	if err := msg.Ack(); err != nil {
		w.b.log.Error("ack failed", "err", err)
	}
}

// stop ends the fetch loop and waits for every handler.
func (w *fetchWorker) stop() {
	w.stopFetch()
	w.fetcher.Wait()
	w.handlers.Wait()
}
