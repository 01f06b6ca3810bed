package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/delayed"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The waiters of this replica: a caller of Call waits for its call's
// stored result, which the replica's results consumer (results.go) hands
// to it by call id.

// errOverloaded: the replica has Config.MaxWaiting callers waiting.
var errOverloaded = errors.New("dispatch: too many waiting callers")

// waiter is a caller of Call waiting for its call's result.
type waiter struct {
	d      *Dispatcher
	id     string
	tenant string
	tool   string
	// ch receives the stored result, believed and decoded, or is closed
	// when the dispatcher stops.
	ch chan *toolwirev1.ToolResponse
	// accepted publishes the admission record unless stopped first.
	accepted *delayed.Record
	ended    bool // guarded by d.mu
}

// wait registers the waiter of a new call (its id is fresh, so it is the
// only one); cancel removes it.
func (d *Dispatcher) wait(tenant, tool, callID string) (*waiter, error) {
	w := &waiter{d: d, id: callID, tenant: tenant, tool: tool, ch: make(chan *toolwirev1.ToolResponse, 1)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil, ErrStopped
	}
	if d.waiting >= d.cfg.MaxWaiting {
		return nil, errOverloaded
	}
	d.waiting++
	d.waiters[callID] = w
	return w, nil
}

// cancel ends the wait: it is no longer counted, and a result arriving
// later is dropped. Safe to call more than once.
func (w *waiter) cancel() {
	d := w.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	d.waiting--
	if d.waiters[w.id] == w {
		delete(d.waiters, w.id)
	}
}

// call is Call without intents: it admits and publishes the call, then
// waits for its result (or, for a repeat of an idempotency key, for the
// original call's, as GetResult does). A call parked for an approver is
// answered AWAITING_APPROVAL at once, or, with wait_for_approval, waited
// for like any call: its result once approved and run (or its denial),
// AWAITING_APPROVAL when the wait ends while it is still parked.
func (d *Dispatcher) call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	r, _, err := d.callAdmitted(ctx, id, o, wait)
	return r, err
}

// callAdmitted is call, also returning the call as this replica admitted
// and published it (nil for a refusal, or a repeat answered with an
// earlier call's result): the source Call takes the tool, spec version
// and session to apply intents with, since a result is not to be believed.
func (d *Dispatcher) callAdmitted(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, *toolwirev1.ToolCall, error) {
	// The caller's slot is taken before admission: a refused Call leaves
	// no trace.
	if err := d.caps.acquire(capWaiting, id, d.cfg.MaxWaitingPerCaller); err != nil {
		return nil, nil, err
	}
	defer d.caps.release(capWaiting, id)
	s, w, err := d.submit(ctx, id, o, true)
	if err != nil {
		if s != nil && s.CallID != "" { // it may run: its id comes with the error
			return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_PENDING, Unconfirmed: s.Unconfirmed}, s.admitted, err
		}
		return nil, nil, err
	}
	if s.Rejected != nil {
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: s.Rejected}, s.admitted, nil
	}
	if s.Awaiting != nil && w == nil {
		// Parked for an approver, and the caller did not ask to wait for
		// the approval: the CONFIRMATION_REQUIRED answer at once.
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, Response: s.Awaiting}, s.admitted, nil
	}
	if w == nil { // duplicate of an earlier call: wait like GetResult
		if !o.WaitForApproval {
			// An earlier call still parked is answered at once, as it was.
			if r, err := d.getResult(ctx, resultQuery{id: id, callID: s.CallID, known: true}); err == nil && r.State == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
				return &toolwirev1.CallResponse{CallId: s.CallID, State: r.State, Response: r.Response}, s.admitted, nil
			}
		}
		r, err := d.getResult(ctx, resultQuery{id: id, callID: s.CallID, wait: d.clampWait(wait), known: true})
		if err != nil {
			return nil, nil, err
		}
		return &toolwirev1.CallResponse{CallId: s.CallID, State: r.State, Response: r.Response}, s.admitted, nil
	}
	defer w.cancel()
	timer := getTimer(d.clampWait(wait))
	defer putTimer(timer)
	select {
	case resp, ok := <-w.ch:
		if !ok {
			w.accepted.Flush()
			return nil, nil, ErrStopped
		}
		w.accepted.Stop()
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, s.admitted, nil
	case <-timer.C:
		w.accepted.Flush()
		// A last look before answering PENDING: the result may be stored
		// and its delivery late (a consumer being made again after a
		// failover or a reconnect).
		if resp, err := d.storedResult(ctx, w.tenant, w.tool, s.CallID); err == nil && resp != nil {
			return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, s.admitted, nil
		}
		if s.Awaiting != nil && d.stillParked(ctx, w.tenant, s.CallID) {
			return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, Response: s.Awaiting}, s.admitted, nil
		}
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_PENDING, Unconfirmed: s.Unconfirmed}, s.admitted, nil
	case <-ctx.Done():
		w.accepted.Flush()
		// The call was admitted: its id comes with the error, so that the
		// caller can cancel it or fetch its result later.
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_PENDING, Unconfirmed: s.Unconfirmed}, s.admitted, ctx.Err()
	}
}

// stillParked reports whether call callID of tenant still waits for an
// approver (its approval record is pending).
func (d *Dispatcher) stillParked(ctx context.Context, tenant, callID string) bool {
	rec, err := d.approvals.Record(ctx, tenant, callID)
	return err == nil && !rec.Decided()
}

// timers are reused across calls: a caller waiting in Call needs one, and
// since Go 1.23 a stopped timer's channel holds no stale value, so Reset
// on a pooled one is safe.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

func (d *Dispatcher) clampWait(w time.Duration) time.Duration {
	if w <= 0 {
		return d.cfg.DefaultWait
	}
	return min(w, d.cfg.MaxWait)
}
