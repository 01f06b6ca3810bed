package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
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
	recheckTimeout = 2 * time.Second
	// recheckRetries and recheckBackoff: after a reconnect or a failure of
	// the consumer, waiters whose look failed (the stream may have no
	// leader yet) are looked at again, backing off from recheckBackoff, in
	// up to recheckRetries passes.
	recheckRetries = 6
	recheckBackoff = 250 * time.Millisecond
)

// followResults consumes the results routed to this replica
// (toolwire.result.*.<name>.*) from the results stream, starting after the
// last message stored now: results of calls admitted from here on. It is
// an ordered consumer (no acks, memory, one replica) that the client makes
// again from the next sequence when it fails (missed heartbeats, a
// reconnect, a gap), so no stored result is skipped.
// Failures the consumer reports are signalled on failed (without
// blocking).
func (d *Dispatcher) followResults(ctx context.Context, failed chan<- struct{}) (jetstream.Consumer, jetstream.ConsumeContext, error) {
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
			select {
			case failed <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		d.deleteResultsConsumer(cons)
		return nil, nil, fmt.Errorf("dispatch: consume results: %w", err)
	}
	return cons, cc, nil
}

// onStored routes a stored result to its waiter and frees the
// concurrency slots its call holds here. It runs on the consumer's one
// goroutine. A result nobody waits for here and that frees no slot is
// not even checked: a reader checks what it reads. One that is not
// believed as the answer of a call of the waiter's (or the slots') tool
// does neither (internal/believed).
func (d *Dispatcher) onStored(m jetstream.Msg) {
	subject := m.Subject()
	callID := subject[strings.LastIndexByte(subject, '.')+1:]
	d.parents.forget(callID) // checked or not: its next child reads it
	d.mu.Lock()
	w := d.waiters[callID]
	d.mu.Unlock()
	if w != nil && subject != d.subj.Result(w.tenant, d.cfg.Name, callID) {
		w = nil // stored under another tenant: never this caller's answer
	}
	tool, held := d.limitGate.Held(callID)
	lw, watched := d.latency.watched(callID)
	if w == nil && !held && !watched {
		return
	}
	switch {
	case w != nil:
		tool = w.tool
	case !held:
		tool = lw.tool
	}
	resp, err := d.checkStored(believed.ConsumedMsg(m), tool)
	if signing.AsError(err) != nil {
		return // not the call's answer: it neither reaches a caller nor frees a slot
	}
	if err == nil {
		d.checkLatency(callID, subject, storedAt(m), resp) // before the waiter gets resp: its meta says so
	}
	if err == nil && w != nil {
		d.deliver(callID, resp)
	}
	// A lookup that failed decides nothing: the recheck reads the result
	// again for the waiter; the slots are freed (a registry that does
	// not answer must not hold them until their leases end).
	d.limitGate.Settle(callID)
}

// checkStored checks data, a result stored on subject with headers h, as
// the answer of a call of tool (internal/believed): an error says it is
// not (a *signing.Error, counted and logged: refusedResult) or that a
// lookup failed (logged; a recheck of the waiters is asked for).
func (d *Dispatcher) checkStored(m believed.Msg, tool string) (*toolwirev1.ToolResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	resp, _, err := believed.Check(ctx, d.bus.Keys, m, tool)
	if se := signing.AsError(err); se != nil {
		d.refusedResult(believed.Refused{Subject: m.Subject, Err: se})
		return nil, err
	}
	if err != nil {
		d.log.Warn("result not checked; looking it up again", "subject", m.Subject, "err", err)
		d.signalRecheck()
	}
	return resp, err
}

// signalRecheck asks for a look at every waiter's stored result
// (recheckWaiters), without blocking.
func (d *Dispatcher) signalRecheck() {
	select {
	case d.recheck <- struct{}{}:
	default:
	}
}

// refusedResult counts and logs a result or event found for a call and
// not believed: it is never the call's answer, nor shown.
func (d *Dispatcher) refusedResult(r believed.Refused) {
	d.metrics.ResultRefused(string(r.Err.Problem))
	d.log.Warn("a result or event that is not believed is stored for a call; it is not the call's record",
		"subject", r.Subject, "seq", r.Sequence, "problem", r.Err.Problem, "err", r.Err)
}

// answers reads calls' believed results (internal/believed).
func (d *Dispatcher) answers() believed.Reader {
	return believed.Reader{JS: d.bus.JS, Stream: d.bus.Results, Keys: d.bus.Keys, OnRefused: d.refusedResult}
}

// deliver hands resp, a stored result believed as the call's answer, to
// the waiter of callID if there is one; it reports whether there was. A
// waiter gets at most one result: it leaves the map here.
func (d *Dispatcher) deliver(callID string, resp *toolwirev1.ToolResponse) bool {
	d.mu.Lock()
	w := d.waiters[callID]
	delete(d.waiters, callID)
	d.mu.Unlock()
	if w == nil {
		return false
	}
	w.ch <- resp
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

// recheckOnFailures looks up the stored result of every waiting caller
// after each reconnect of the replica's connection and each failure the
// results consumer reports (missed heartbeats: its server died; it is
// being made again): a result stored meanwhile is answered without waiting
// for the consumer to be back (a leader to elect). The results stream's
// leader answers these gets (storedResult). It returns when ctx ends,
// closing done.
func (d *Dispatcher) recheckOnFailures(ctx context.Context, status chan nats.Status, failed <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-status:
			if !ok {
				return
			}
			d.signalReconnect()
		case <-failed:
		}
		d.recheckWaiters(ctx)
	}
}

// signalReconnect wakes every call publish awaiting its acknowledgement
// (awaitCall): the connection is back, maybe on another server, and what
// was in flight on the old one may never be answered.
func (d *Dispatcher) signalReconnect() {
	next := make(chan struct{})
	close(*d.reconnected.Swap(&next))
}

// recheckWaiters looks up the stored result of every waiting caller and
// answers those that have one. When a lookup fails (the stream is not
// answering) the pass stops there and the rest are looked at again,
// backing off from recheckBackoff, up to recheckRetries passes: a pass
// costs at most one failed lookup.
func (d *Dispatcher) recheckWaiters(ctx context.Context) {
	type waiting struct{ id, tenant, tool string }
	d.mu.Lock()
	todo := make([]waiting, 0, len(d.waiters))
	for id, w := range d.waiters {
		todo = append(todo, waiting{id, w.tenant, w.tool})
	}
	d.mu.Unlock()
	backoff := recheckBackoff
	for pass := 1; ; pass++ {
		for len(todo) > 0 {
			resp, err := d.storedResult(ctx, todo[0].tenant, todo[0].tool, todo[0].id)
			if err != nil {
				break
			}
			if resp != nil {
				d.deliver(todo[0].id, resp)
			}
			todo = todo[1:]
		}
		if len(todo) == 0 || ctx.Err() != nil {
			return
		}
		if pass >= recheckRetries {
			d.log.Warn("results of waiting callers not looked up; the results consumer delivers them", "waiters", len(todo))
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff *= 2
	}
}

// storedResult returns the stored result of a call routed to this replica,
// nil when there is none. It reads the stream's leader: a replica that
// lags would say "none" for a result the leader acknowledged, and a
// caller would be told PENDING for a call that is done.
func (d *Dispatcher) storedResult(ctx context.Context, tenant, tool, callID string) (*toolwirev1.ToolResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, recheckTimeout)
	defer cancel()
	s, err := d.answers().Read(ctx, d.subj.Result(tenant, d.cfg.Name, callID), tool)
	if err != nil {
		return nil, fmt.Errorf("dispatch: look up result of %s: %w", callID, err)
	}
	if s == nil {
		return nil, nil
	}
	d.checkLatency(callID, s.Msg.Subject, s.Msg.Time, s.Resp) // measured here when the consumer could not check it
	return s.Resp, nil
}

// storedAt is when the results stream stored m (its timestamp); now when
// the message has no metadata.
func storedAt(m jetstream.Msg) time.Time {
	if md, err := m.Metadata(); err == nil {
		return md.Timestamp
	}
	return time.Now()
}
