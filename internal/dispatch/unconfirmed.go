package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An unconfirmed call is one whose publish on the calls stream may have
// been stored but was not acknowledged by the admission horizon
// (Config.PublishHorizon), or when its caller left: the caller was told it is
// accepted (doc.go, "Publishing"). The republisher keeps publishing it
// under its message id (the call id) until the stream acknowledges it —
// a stored call is acknowledged as a duplicate — or until it could no
// longer run anyway: past the call's deadline (a worker never starts a
// call past it) or half the calls stream's duplicate window (past the
// window a republish would store a second copy). Then it is left to the
// overdue sweeper (internal/maintenance), which answers every accepted
// call without a result after its deadline.
type unconfirmed struct {
	msg    *nats.Msg
	tenant string
	call   *toolwirev1.ToolCall
	until  time.Time
}

// republisher keeps publishing unconfirmed calls (see unconfirmed), one
// goroutine a call, at most maxUnconfirmed at once. A startstop.Service:
// Stop ends every republish (each call is then the sweeper's).
type republisher struct {
	d *Dispatcher

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
	n       int // calls taken
	bytes   int // their messages' bytes

	confirmed, abandoned atomic.Int64
}

// maxUnconfirmed and maxUnconfirmedBytes bound the calls republished at
// once by one replica, and their bytes (a call's arguments may be large).
// A call over either is left to the overdue sweeper (logged).
const (
	maxUnconfirmed      = 10_000
	maxUnconfirmedBytes = 256 << 20
)

// republishBackoff is the first and the longest wait between republishes.
const (
	republishFirst = 250 * time.Millisecond
	republishMax   = 5 * time.Second
)

// Start makes the republisher take calls.
func (r *republisher) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrStopped
	}
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	return nil
}

// Stop ends every republish and waits for them (within ctx).
func (r *republisher) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add takes u over; false when it cannot (not started, stopped, or at
// maxUnconfirmed): then u is the sweeper's.
func (r *republisher) add(u unconfirmed) bool {
	size := len(u.msg.Data)
	if !r.take(size) {
		return false
	}
	go r.run(r.ctx, u, size)
	return true
}

// take counts one more call of size bytes, unless the republisher is not
// running or is full; under r.mu, so no wg.Add follows Stop's Wait.
func (r *republisher) take(size int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil || r.stopped || r.n >= maxUnconfirmed || r.bytes+size > maxUnconfirmedBytes {
		return false
	}
	r.n++
	r.bytes += size
	r.wg.Add(1)
	return true
}

// done uncounts what take counted.
func (r *republisher) done(size int) {
	r.mu.Lock()
	r.n--
	r.bytes -= size
	r.mu.Unlock()
	r.wg.Done()
}

// run republishes u until it is confirmed or given up (unconfirmed).
func (r *republisher) run(ctx context.Context, u unconfirmed, size int) {
	defer r.done(size)
	d := r.d
	callID := u.call.CallId
	err := d.republishUntil(ctx, u)
	if err != nil {
		r.abandoned.Add(1)
		d.log.Warn("unconfirmed call given up; the overdue sweeper answers it after its deadline", "call_id", callID, "err", err)
		return
	}
	r.confirmed.Add(1)
	d.log.Info("unconfirmed call confirmed stored", "call_id", callID)
	d.ensureAcceptedRecord(ctx, u)
}

// errGivenUp: republishing an unconfirmed call stopped before the stream
// acknowledged it.
var errGivenUp = errors.New("dispatch: call not confirmed before its deadline or the duplicate window")

// record stores the admission record of a call confirmed only after a
// publish went unanswered (ensureAcceptedRecord), in a goroutine of its
// own under the same cap; false when it cannot (the sweeper then relies
// on the core record).
func (r *republisher) record(u unconfirmed) bool {
	if !r.take(0) {
		return false
	}
	go func(ctx context.Context) {
		defer r.done(0)
		r.d.ensureAcceptedRecord(ctx, u)
	}(r.ctx)
	return true
}

// republishUntil publishes u's call again (same message id) with backoff
// until the stream acknowledges it, ctx ends or u.until passes. Every
// answer other than an acknowledgement is ambiguous here (an earlier
// publish may be stored: a stream that refuses a republish, e.g. for its
// limits, says nothing of it), so only an acknowledgement ends it.
func (d *Dispatcher) republishUntil(ctx context.Context, u unconfirmed) error {
	var last error
	for backoff := republishFirst; ; backoff = min(2*backoff, republishMax) {
		if time.Now().After(u.until) {
			return errors.Join(errGivenUp, last)
		}
		fut, err := d.bus.JS.PublishMsgAsync(u.msg)
		if err == nil {
			select {
			case <-fut.Ok():
				return nil
			case err = <-fut.Err():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		last = err
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ensureAcceptedRecord stores u's admission record when the events stream
// has none for the call: it was sent as a core message, which a partition
// can lose, and GetResult, Watch and the overdue sweeper read it.
func (d *Dispatcher) ensureAcceptedRecord(ctx context.Context, u unconfirmed) {
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	callID := u.call.CallId
	if ev, err := d.lastEvent(ctx, u.tenant, callID, u.call.GetTool()); ev != nil || err != nil {
		return // there is one, or the look failed: the sweeper still has the call's deadline
	}
	ev := acceptedEvent(u.call, u.call.AcceptedAt)
	data, err := proto.Marshal(ev)
	if err == nil {
		_, err = d.bus.JS.PublishMsg(ctx, d.signedEvent(d.subj.Event(u.tenant, d.cfg.Name, callID), ev, data))
	}
	if err != nil {
		d.log.Warn("admission record of an unconfirmed call not stored", "call_id", callID, "err", err)
	}
}

// unconfirmedUntil is when republishing call stops: its deadline, or half
// the calls stream's duplicate window after its first publish (its
// acceptance), whichever comes first.
func (d *Dispatcher) unconfirmedUntil(call *toolwirev1.ToolCall) time.Time {
	first := time.Now()
	if at := call.GetAcceptedAt(); at != nil {
		first = at.AsTime()
	}
	until := first.Add(d.bus.Config.DuplicateWindow / 2)
	if dl := call.GetDeadline(); dl != nil && dl.AsTime().Before(until) {
		until = dl.AsTime()
	}
	return until
}
