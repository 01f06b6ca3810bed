package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The baseline's own names, so it never touches a toolwire layout.
const (
	baseCallsStream   = "BENCHBASE_CALLS"
	baseResultsStream = "BENCHBASE_RESULTS"
	baseCallSubject   = "benchbase.call.native.default.builtin.echo"
	baseResultPrefix  = "benchbase.result.default.bench."
	baseConsumer      = "benchbase_pool_native"
	// baseFetchWait matches the worker's default FetchWait.
	baseFetchWait = time.Second
)

// baseline is the toolwire round trip written directly on nats.go's
// jetstream package: the least any implementation of it has to do.
//
//	caller: register a waiter → async publish (msg id) → await the PubAck
//	worker: Fetch(≤ free slots) → publish the result with
//	        ExpectLastSequencePerSubject(0) → ack
//	caller: receipt on a core subscription → wake the waiter
//
// Neither side decodes a payload: the worker reads the call id at its
// fixed offset in the ToolCall bytes.
type baseline struct {
	log      *slog.Logger
	p        payloads
	idOffset int
	callerJS jetstream.JetStream
	workerJS jetstream.JetStream
	cons     jetstream.Consumer
	sub      *nats.Subscription
	next     atomic.Uint64

	mu      sync.Mutex
	waiters map[string]chan struct{}

	stopFetch context.CancelFunc
	fetcher   sync.WaitGroup
	handlers  sync.WaitGroup
}

// startBaseline lays out the baseline's streams and consumer on e (with
// the settings toolwire's bus gives CALLS, RESULTS and a pool) and starts
// its worker with concurrency slots.
func startBaseline(ctx context.Context, e *env, p payloads, concurrency int) (*baseline, error) {
	if p.call.offsets[0]+idLen > len(p.call.data) {
		return nil, errors.New("bench: captured call has no call id")
	}
	b := &baseline{log: e.cfg.Logger.With("component", "baseline"), p: p, idOffset: p.call.offsets[0],
		waiters: map[string]chan struct{}{}}
	callerNC, err := e.connect("bench-baseline-caller")
	if err != nil {
		return nil, err
	}
	workerNC, err := e.connect("bench-baseline-worker")
	if err != nil {
		return nil, err
	}
	if b.callerJS, err = jetstream.New(callerNC, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return nil, err
	}
	if b.workerJS, err = jetstream.New(workerNC, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return nil, err
	}
	calls, err := b.callerJS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: baseCallsStream, Subjects: []string{"benchbase.call.>"},
		Retention: jetstream.LimitsPolicy, MaxAge: 720 * time.Hour, MaxBytes: 4 << 30, Discard: jetstream.DiscardNew,
		Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage, Replicas: 1,
		AllowDirect: true, DenyPurge: true, DenyDelete: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: baseline calls stream: %w", err)
	}
	if _, err := b.callerJS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: baseResultsStream, Subjects: []string{"benchbase.result.>"},
		Retention: jetstream.LimitsPolicy, MaxAge: 720 * time.Hour, MaxBytes: -1, Discard: jetstream.DiscardOld,
		Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage, Replicas: 1, AllowDirect: true, DenyPurge: true,
	}); err != nil {
		return nil, fmt.Errorf("bench: baseline results stream: %w", err)
	}
	b.cons, err = calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: baseConsumer, FilterSubject: "benchbase.call.native.>",
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1024, MaxWaiting: 512,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: baseline consumer: %w", err)
	}
	if b.sub, err = callerNC.Subscribe(baseResultPrefix+"*", b.onResult); err != nil {
		return nil, err
	}
	if err := b.sub.SetPendingLimits(-1, 256<<20); err != nil {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := callerNC.FlushWithContext(fctx); err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopFetch = stop
	b.fetcher.Add(1)
	go b.fetchLoop(loopCtx, b.cons, concurrency)
	return b, nil
}

// call makes one round trip.
func (b *baseline) call(ctx context.Context) error {
	id := fmt.Sprintf("%0*d", idLen, b.next.Add(1))
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.waiters[id] = ch
	b.mu.Unlock()
	fut, err := b.callerJS.PublishAsync(baseCallSubject, b.p.call.with(id), jetstream.WithMsgID(id))
	if err == nil {
		select {
		case <-fut.Ok():
		case err = <-fut.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		timer := time.NewTimer(callWait)
		defer timer.Stop()
		select {
		case <-ch:
			return nil
		case <-timer.C:
			err = fmt.Errorf("bench: baseline call %s: no result within %s", id, callWait)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	b.mu.Lock()
	delete(b.waiters, id)
	b.mu.Unlock()
	return err
}

func (b *baseline) onResult(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	b.mu.Lock()
	ch := b.waiters[id]
	delete(b.waiters, id)
	b.mu.Unlock()
	if ch != nil {
		ch <- struct{}{}
	}
}

// fetchLoop is the worker's consume loop: never more messages requested
// than free slots, one goroutine per message, and a stop waits for the
// current pull request to end.
func (b *baseline) fetchLoop(ctx context.Context, cons jetstream.Consumer, concurrency int) {
	defer b.fetcher.Done()
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
				b.log.Warn("fetch failed", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		for msg := range batch.Messages() {
			inflight.Add(1)
			b.handlers.Add(1)
			go func() {
				defer func() {
					inflight.Add(-1)
					b.handlers.Done()
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
				b.handle(msg)
			}()
		}
		cancel()
	}
}

// handle publishes the result once, then acks.
func (b *baseline) handle(msg jetstream.Msg) {
	data := msg.Data()
	if len(data) < b.idOffset+idLen {
		if err := msg.Term(); err != nil {
			b.log.Error("term failed", "err", err)
		}
		return
	}
	id := string(data[b.idOffset : b.idOffset+idLen])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.workerJS.Publish(ctx, baseResultPrefix+id, b.p.result.with(id), jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		b.log.Error("publish result failed", "err", err)
		if err := msg.NakWithDelay(time.Second); err != nil {
			b.log.Error("nak failed", "err", err)
		}
		return
	}
	if err := msg.Ack(); err != nil {
		b.log.Error("ack failed", "err", err)
	}
}

// stop ends the fetch loop and waits for every handler; no call may be
// in flight.
func (b *baseline) stop() error {
	b.stopFetch()
	b.fetcher.Wait()
	b.handlers.Wait()
	return b.sub.Unsubscribe()
}
