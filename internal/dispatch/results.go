package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Results reach waiting callers only once the results stream has stored
// them (doc.go, "Results"): a JetStream publish also reaches core
// subscribers when the stream refuses it or never answers (a cluster with
// no RESULTS leader), and a result that was not stored is not the call's
// result.
const (
	// resultsExpiry and resultsHeartbeat shape the pull requests of the
	// replica's results consumer: with no results, one request every
	// resultsExpiry; a consumer that stops sending heartbeats (its server
	// died) is noticed after two missed ones and made again from the next
	// stream sequence.
	resultsExpiry    = 5 * time.Second
	resultsHeartbeat = time.Second
	// resultsMaxBytes bounds the results a replica buffers unread.
	resultsMaxBytes = 64 << 20
	// resultsInactive is the server's backstop for the consumer of a
	// replica that died: deleted after this long without pull requests.
	resultsInactive = time.Minute
	// recheckTimeout bounds one look at the results stream for a waiter.
	recheckTimeout = 5 * time.Second
	// recheckRetries and recheckBackoff: after a reconnect, waiters whose
	// look failed (the stream may have no leader yet) are looked at again,
	// backing off from recheckBackoff, up to recheckRetries times.
	recheckRetries = 6
	recheckBackoff = 250 * time.Millisecond
)

// followResults consumes the results routed to this replica
// (toolwire.result.*.<name>.*) from the results stream, starting after the
// last message stored now: results of calls admitted from here on. It is
// an ordered consumer (no acks, memory, one replica) that the client makes
// again from the next sequence when it fails (missed heartbeats, a
// reconnect, a gap), so no stored result is skipped.
func (d *Dispatcher) followResults(ctx context.Context) (jetstream.Consumer, jetstream.ConsumeContext, error) {
	info, err := d.bus.Results.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("dispatch: results stream: %w", err)
	}
	cons, err := d.bus.Results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{d.subj.ResultsOf(d.cfg.Name)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.State.LastSeq + 1,
		InactiveThreshold: resultsInactive})
	if err != nil {
		return nil, nil, fmt.Errorf("dispatch: results consumer: %w", err)
	}
	cc, err := cons.Consume(d.onStored, jetstream.PullExpiry(resultsExpiry), jetstream.PullHeartbeat(resultsHeartbeat),
		jetstream.PullMaxBytes(resultsMaxBytes), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			d.log.Debug("results consumer", "err", err)
		}))
	if err != nil {
		d.deleteResultsConsumer(cons)
		return nil, nil, fmt.Errorf("dispatch: consume results: %w", err)
	}
	return cons, cc, nil
}

// onStored routes a stored result to its waiter. It runs on the
// consumer's one goroutine, so it only routes bytes: waiters decode their
// own result.
func (d *Dispatcher) onStored(m jetstream.Msg) {
	subject := m.Subject()
	d.deliver(subject[strings.LastIndexByte(subject, '.')+1:], m.Data())
}

// deliver hands data, a stored result, to the waiter of callID if there is
// one; it reports whether there was. A waiter gets at most one result: it
// leaves the map here.
func (d *Dispatcher) deliver(callID string, data []byte) bool {
	d.mu.Lock()
	w := d.waiters[callID]
	delete(d.waiters, callID)
	d.mu.Unlock()
	if w == nil {
		return false
	}
	w.ch <- data
	return true
}

// deleteResultsConsumer deletes the results consumer's current server
// consumer (an ordered consumer's Stop leaves it there until inactive).
func (d *Dispatcher) deleteResultsConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchCleanup)
	defer cancel()
	if err := d.bus.Results.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		d.log.Debug("results consumer not deleted; the server removes it when inactive", "consumer", info.Name, "err", err)
	}
}

// watchReconnects looks at the results stream for every waiting caller
// after each reconnect of the replica's connection: a result stored while
// it was away is found even if the consumer is slow to come back (a new
// leader to elect). It returns when done is closed.
func (d *Dispatcher) watchReconnects(status chan nats.Status, done <-chan struct{}) {
	defer close(d.reconnectsDone)
	for {
		select {
		case <-done:
			return
		case _, ok := <-status:
			if !ok {
				return
			}
			d.recheckWaiters(done)
		}
	}
}

// recheckWaiters looks up the stored result of every waiting caller and
// answers those that have one. Lookups that fail are tried again, backing
// off, a few times; it gives up early when done is closed.
func (d *Dispatcher) recheckWaiters(done <-chan struct{}) {
	type waiting struct{ id, tenant string }
	d.mu.Lock()
	todo := make([]waiting, 0, len(d.waiters))
	for id, w := range d.waiters {
		todo = append(todo, waiting{id, w.tenant})
	}
	d.mu.Unlock()
	backoff := recheckBackoff
	for try := 0; len(todo) > 0; try++ {
		failed := todo[:0]
		for _, w := range todo {
			select {
			case <-done:
				return
			default:
			}
			data, err := d.storedResult(w.tenant, w.id)
			switch {
			case err != nil:
				failed = append(failed, w)
			case data != nil:
				d.deliver(w.id, data)
			}
		}
		todo = failed
		if len(todo) == 0 || try+1 >= recheckRetries {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		backoff *= 2
	}
	if len(todo) > 0 {
		d.log.Warn("results not looked up after a reconnect; the results consumer delivers them", "waiters", len(todo))
	}
}

// storedResult returns the stored result of a call routed to this replica,
// nil when there is none.
func (d *Dispatcher) storedResult(tenant, callID string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	m, err := d.bus.Results.GetLastMsgForSubject(ctx, d.subj.Result(tenant, d.cfg.Name, callID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: look up result of %s: %w", callID, err)
	}
	return m.Data, nil
}
