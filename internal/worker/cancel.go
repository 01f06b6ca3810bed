package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
)

// CancelledError is the cause a call's context is cancelled with when its
// caller cancels it.
type CancelledError struct{ bus.Tombstone }

func (e *CancelledError) Error() string {
	msg := "cancelled by " + e.By
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// cancels maps the cancel keys of running calls to their cancel functions,
// and remembers the tombstones the watcher has seen. A call registers and
// checks the seen tombstones under one lock, and the watcher records and
// cancels under the same lock, so a cancel arriving at any moment reaches
// the call. Calls accepted before the watcher went live (or long ago) also
// look the tombstone up in the bucket.
type cancels struct {
	mu  sync.Mutex
	fns map[string]*registration
	// shutdown, once set, is the cause every registered and every later
	// call is cancelled with.
	shutdown error
	// stop is closed with the first cancelAll: the worker's grace period
	// is over (stopping).
	stop      chan struct{}
	seen      map[string]seenTombstone
	liveSince time.Time
	pruned    time.Time
	// reconnects is the connection's reconnect count when liveSince was
	// set: after a reconnect the watcher may have missed tombstones, so
	// liveSince moves to the moment the new count is first seen.
	reconnects uint64
}

type seenTombstone struct {
	ts bus.Tombstone
	at time.Time
}

// seenFor is how long a seen tombstone is remembered; calls accepted
// earlier look their tombstone up in the bucket.
const seenFor = time.Hour

// ClockSkew is the margin allowed between dispatcher and worker clocks. A
// call admitted less than ClockSkew after the worker's cancel watch went live
// (or reconnected) may have a tombstone the watch missed, so the worker also
// looks its cancel key up: a start-up cost of one KV get per call.
const ClockSkew = time.Second

func (c *cancels) live(now time.Time, reconnects uint64) {
	c.mu.Lock()
	c.liveSince, c.reconnects = now, reconnects
	c.mu.Unlock()
}

// registration is one running call's entry in cancels: calls sharing a
// key (redeliveries racing an abandoned execution) form a list.
type registration struct {
	key  string
	fn   context.CancelCauseFunc
	next *registration
	// exec is the attempt executing now, if any, for the watchdog.
	exec atomic.Pointer[execution]
}

// begin makes ex the running attempt of the call registered as r.
func (r *registration) begin(ex *execution) { r.exec.Store(ex) }

// end marks the attempt returned; false means the watchdog abandoned it
// first.
func (r *registration) end(ex *execution) bool {
	r.exec.Store(nil)
	return ex.state.CompareAndSwap(execRunning, execReturned)
}

// register records fn for key and returns the tombstone already seen for
// it, if any; unregister(r) removes fn.
func (c *cancels) register(key string, fn context.CancelCauseFunc) (seen *bus.Tombstone, r *registration) {
	r = &registration{key: key, fn: fn}
	c.mu.Lock()
	if c.fns == nil {
		c.fns = map[string]*registration{}
	}
	r.next = c.fns[key]
	c.fns[key] = r
	if st, ok := c.seen[key]; ok {
		seen = &st.ts
	}
	shutdown := c.shutdown
	c.mu.Unlock()
	if shutdown != nil {
		fn(shutdown)
	}
	return seen, r
}

// liveOther reports whether another delivery of r's call is in flight
// in this worker, and not an execution the watchdog abandoned (which
// never settles its message).
func (c *cancels) liveOther(r *registration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := c.fns[r.key]; p != nil; p = p.next {
		if p == r {
			continue
		}
		if ex := p.exec.Load(); ex == nil || ex.state.Load() != execAbandoned {
			return true
		}
	}
	return false
}

// unregister removes a registration.
func (c *cancels) unregister(r *registration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := c.fns[r.key]; p != nil; p = p.next {
		switch {
		case p == r && p == c.fns[r.key]:
			if r.next == nil {
				delete(c.fns, r.key)
			} else {
				c.fns[r.key] = r.next
			}
			return
		case p.next == r:
			p.next = r.next
			return
		}
	}
}

// cancelAll cancels every registered call, and every call registered
// later, with cause.
func (c *cancels) cancelAll(cause error) {
	c.mu.Lock()
	if c.stop == nil {
		c.stop = make(chan struct{})
	}
	if c.shutdown == nil {
		close(c.stop)
	}
	c.shutdown = cause
	var all []context.CancelCauseFunc
	for _, r := range c.fns {
		for ; r != nil; r = r.next {
			all = append(all, r.fn)
		}
	}
	c.mu.Unlock()
	for _, fn := range all {
		fn(cause)
	}
}

// stopping is closed once the worker's grace period is over: a delivery
// holding its call while the server does not answer (hold.go) gives up.
// A caller's cancel does not close it.
func (c *cancels) stopping() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop == nil {
		c.stop = make(chan struct{})
	}
	return c.stop
}

// lookupNeeded reports whether a call accepted at accepted must also look
// its tombstone up in the bucket: the watcher may have missed it.
func (c *cancels) lookupNeeded(accepted, now time.Time, reconnects uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.liveSince.IsZero() {
		return true
	}
	if reconnects != c.reconnects {
		c.liveSince, c.reconnects = now, reconnects
	}
	horizon := c.liveSince
	if h := now.Add(-seenFor); h.After(horizon) {
		horizon = h
	}
	return accepted.Before(horizon.Add(ClockSkew))
}

func (c *cancels) cancel(key string, ts bus.Tombstone) bool {
	now := time.Now()
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]seenTombstone{}
	}
	c.seen[key] = seenTombstone{ts: ts, at: now}
	if now.Sub(c.pruned) > time.Minute {
		for k, st := range c.seen {
			if now.Sub(st.at) > seenFor {
				delete(c.seen, k)
			}
		}
		c.pruned = now
	}
	var fns []context.CancelCauseFunc
	for r := c.fns[key]; r != nil; r = r.next {
		fns = append(fns, r.fn)
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn(&CancelledError{ts})
	}
	return len(fns) > 0
}

// watchCancels holds one core subscription on the cancel bucket's subjects.
func (w *Worker) watchCancels() (*nats.Subscription, error) {
	prefix := "$KV." + w.bus.Config.CancelBucket() + "."
	sub, err := w.bus.NC.Subscribe(prefix+">", func(m *nats.Msg) {
		if op := m.Header.Get("KV-Operation"); op != "" {
			return // DEL or PURGE: nothing to cancel
		}
		key := strings.TrimPrefix(m.Subject, prefix)
		var ts bus.Tombstone
		if err := json.Unmarshal(m.Data, &ts); err != nil {
			ts = bus.Tombstone{By: "unknown"}
		}
		if w.cancels.cancel(key, ts) {
			w.log.Info("cancelling running call", "key", key, "by", ts.By)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("worker: subscribe cancels: %w", err)
	}
	return sub, nil
}

// tombstone returns the cancel record of a call, or nil. It is read from
// the cancels bucket's leader (bus.KVGetFromLeader): a direct get may be
// answered by a replica that has not yet stored a tombstone the leader
// acknowledged, and the caller of a call cancelled while it was queued
// has been answered CANCELLED already.
func (w *Worker) tombstone(ctx context.Context, tenant, callID string) (*bus.Tombstone, error) {
	e, err := bus.KVGetFromLeader(ctx, w.bus.NC, w.bus.Config.CancelBucket(), bus.CancelKey(tenant, callID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ts bus.Tombstone
	if json.Unmarshal(e.Value, &ts) != nil {
		ts = bus.Tombstone{By: "unknown"}
	}
	return &ts, nil
}
