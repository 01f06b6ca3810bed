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

// The baselines' own names, so they never touch a toolwire layout.
const (
	baseCallsStream   = "BENCHBASE_CALLS"
	baseResultsStream = "BENCHBASE_RESULTS"
	baseCallSubject   = "benchbase.call.native.default.builtin.echo"
	baseResultPrefix  = "benchbase.result.default.bench."
	baseConsumer      = "benchbase_pool_native"
	// baseMaxAckPending is the pool consumer's MaxAckPending, as a pool's.
	baseMaxAckPending = 1024
)

// baseline is the toolwire round trip written directly on nats.go's
// jetstream package: the least any implementation of it has to do. Its
// caller side is the same for both baselines; the worker side is
// jetstream-raw's (rawWorker, a Consume callback) or jetstream-fetch's
// (fetchWorker, the worker's Fetch loop).
//
//	caller: register a waiter → async publish (msg id) → await the PubAck
//	worker: take the call → publish the result with
//	        ExpectLastSequencePerSubject(0) → its PubAck → ack
//	caller: the result on one core wildcard subscription → wake the waiter
//
// Neither side decodes a payload: the worker reads the call id at its
// fixed offset in the ToolCall bytes, the caller at its offset in the
// ToolResponse bytes (a result naming another call than its subject does
// is never taken as the answer).
type baseline struct {
	log          *slog.Logger
	p            payloads
	idOffset     int
	resultOffset int
	callerJS     jetstream.JetStream
	workerJS     jetstream.JetStream
	cons         jetstream.Consumer
	sub          *nats.Subscription
	next         atomic.Uint64
	worker       interface{ stop() }

	mu      sync.Mutex
	waiters map[string]chan [idLen]byte
	// answered counts results handed to their waiter; stray counts results
	// nobody waited for (a second result of a call, or one after its
	// caller gave up): 0 in a sound run.
	answered, stray atomic.Int64
}

// startBaseline lays out the baseline's streams and consumer on e (with
// the settings toolwire's bus gives CALLS, RESULTS and a pool) and starts
// the worker side of e.cfg.Path: PathBaseline (jetstream-raw) or
// PathBaselineFetch (jetstream-fetch, with e.cfg.workerConcurrency()
// slots).
func startBaseline(ctx context.Context, e *env, p payloads) (*baseline, error) {
	if p.call.offsets[0]+idLen > len(p.call.data) || p.result.offsets[0]+idLen > len(p.result.data) {
		return nil, errors.New("bench: captured call or result has no call id")
	}
	b := &baseline{log: e.cfg.Logger.With("component", "baseline"), p: p, idOffset: p.call.offsets[0],
		resultOffset: p.result.offsets[0], waiters: map[string]chan [idLen]byte{}}
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
	// Every result's future resolves, so the raw worker's acker never waits
	// for ever.
	if b.workerJS, err = jetstream.New(workerNC, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(10*time.Second)); err != nil {
		return nil, err
	}
	if b.cons, err = baseLayout(ctx, b.workerJS); err != nil { // the worker side consumes on its own connection
		return nil, err
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
	if e.cfg.Path == PathBaselineFetch {
		b.worker = startFetchWorker(ctx, b, e.cfg.workerConcurrency())
		return b, nil
	}
	if b.worker, err = startRawWorker(b); err != nil {
		return nil, errors.Join(err, b.sub.Unsubscribe())
	}
	return b, nil
}

// baseLayout creates the calls stream (like CALLS: a limits stream, file
// storage, a 10-minute duplicate window, discard-new), the results stream
// (like RESULTS) and the durable pull consumer (like a pool's).
func baseLayout(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	calls, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: baseCallsStream, Subjects: []string{"benchbase.call.>"},
		Retention: jetstream.LimitsPolicy, MaxAge: 720 * time.Hour, MaxBytes: 4 << 30, Discard: jetstream.DiscardNew,
		Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage, Replicas: 1,
		AllowDirect: true, DenyPurge: true, DenyDelete: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: baseline calls stream: %w", err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: baseResultsStream, Subjects: []string{"benchbase.result.>"},
		Retention: jetstream.LimitsPolicy, MaxAge: 720 * time.Hour, MaxBytes: -1, Discard: jetstream.DiscardOld,
		Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage, Replicas: 1, AllowDirect: true, DenyPurge: true,
	}); err != nil {
		return nil, fmt.Errorf("bench: baseline results stream: %w", err)
	}
	cons, err := calls.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: baseConsumer, FilterSubject: "benchbase.call.native.>",
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: baseMaxAckPending, MaxWaiting: 512,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: baseline consumer: %w", err)
	}
	return cons, nil
}

// call makes one round trip: it is done when the call is stored (its
// PubAck) and its own result has arrived.
func (b *baseline) call(ctx context.Context) error {
	id := fmt.Sprintf("%0*d", idLen, b.next.Add(1))
	ch := make(chan [idLen]byte, 1)
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
		case got := <-ch:
			if string(got[:]) != id {
				return fmt.Errorf("bench: baseline call %s: answered with the result of call %s", id, got[:])
			}
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

// onResult hands a result to the waiter its subject names, with the call
// id its payload carries (the caller checks the two agree).
func (b *baseline) onResult(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var got [idLen]byte
	if len(m.Data) >= b.resultOffset+idLen {
		copy(got[:], m.Data[b.resultOffset:])
	}
	b.mu.Lock()
	ch := b.waiters[id]
	delete(b.waiters, id)
	b.mu.Unlock()
	if ch == nil {
		b.stray.Add(1)
		return
	}
	b.answered.Add(1)
	ch <- got
}

// callID is the id of the call msg carries; a message too short to carry
// one is terminated.
func (b *baseline) callID(msg jetstream.Msg) (string, bool) {
	data := msg.Data()
	if len(data) < b.idOffset+idLen {
		if err := msg.Term(); err != nil {
			b.log.Error("term failed", "err", err)
		}
		return "", false
	}
	return string(data[b.idOffset : b.idOffset+idLen]), true
}

// stop ends the worker side and waits for it; no call may be in flight.
func (b *baseline) stop() error {
	b.worker.stop()
	return b.sub.Unsubscribe()
}
