package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/lazy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrStopped is returned by calls made after Stop.
var ErrStopped = errors.New("dispatch: dispatcher stopped")

var errOverloaded = errors.New("dispatch: too many waiting callers")

// Dispatcher admits calls, publishes them and routes their results to
// waiting callers. It is the core behind every API server.
type Dispatcher struct {
	bus  *bus.Bus
	reg  *registry.Store
	cfg  Config
	log  *slog.Logger
	subj bus.Subjects

	mu      sync.Mutex
	waiters map[string]*waiter
	waiting int
	reaper  jetstream.ConsumeContext
	mover   jetstream.ConsumeContext
	retries *nats.Subscription // dead-letter retries operators request (dlqretry.go)
	stopped bool

	// results consumes the stored results routed to this replica
	// (results.go); resultsCons is its consumer, deleted at Stop.
	results     jetstream.ConsumeContext
	resultsCons jetstream.Consumer
	// status reports the connection's reconnects to the goroutine that
	// then looks up the results of waiting callers (results.go);
	// stopRechecks ends it, and rechecksDone is closed when it has.
	status       chan nats.Status
	stopRechecks context.CancelFunc
	rechecksDone chan struct{}

	// sweepStop ends the orphan sweeper (orphans.go); sweepDone is closed
	// when it has ended. Nil when it does not run.
	sweepStop context.CancelFunc
	sweepDone chan struct{}
	// pools is admission's view of the pool consumers (poolcheck.go); nil
	// when Config.PoolCheck is negative.
	pools *poolCheck

	callsStream string   // cached: the name is computed from the prefix
	expectCalls []string // the Nats-Expected-Stream header value; never modified
	lazyRecords *lazy.Queue
	applier     *intents.Applier

	tracer  trace.Tracer // nil = tracing off
	metrics *telemetry.DispatcherMetrics

	caps callerCaps // per-caller Watches and waiting requests
	load *loadView  // pool backlogs and store use, for admission (load.go)
	// lookResult is loadResult; a test replaces it to pin an interleaving
	// the server's asynchronous store makes rare.
	lookResult func(ctx context.Context, subject string) (*toolwirev1.ToolResponse, error)
}

// New returns a Dispatcher over b and the registry store reg (which the
// caller starts and stops).
func New(b *bus.Bus, reg *registry.Store, cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics := cfg.Metrics
	if metrics == nil {
		var err error
		if metrics, err = telemetry.NewDispatcherMetrics(nil); err != nil {
			return nil, fmt.Errorf("dispatch: metrics: %w", err)
		}
	}
	d := &Dispatcher{bus: b, reg: reg, cfg: cfg, subj: b.Subjects, callsStream: b.Config.CallsStream(), expectCalls: []string{b.Config.CallsStream()},
		lazyRecords: lazy.NewQueue(cfg.AcceptedRecordDelay), applier: intents.NewApplier(b.Sessions, intents.ApplierConfig{}),
		log:     telemetry.WithTraceIDs(cfg.Logger).With("component", "dispatcher", "dispatcher", cfg.Name),
		waiters: map[string]*waiter{}, tracer: telemetry.Tracer(cfg.TracerProvider), metrics: metrics}
	d.lookResult = d.loadResult
	if cfg.PoolCheck > 0 {
		d.pools = newPoolCheck(b, cfg.PoolCheck, d.log)
	}
	d.load = newLoadView(d)
	metrics.ObserveLoad(d.load.metrics)
	metrics.ObserveWaiting(func() float64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		return float64(d.waiting)
	})
	return d, nil
}

// Name is the replica's routing name.
func (d *Dispatcher) Name() string { return d.cfg.Name }

// Start consumes this replica's stored results and starts the reaper, the
// retry mover, the orphan sweeper and the listing of the pool consumers
// that admission checks calls against (poolcheck.go).
// (Pool consumers are created by workers before they register their tools,
// and admission refuses a call no pool consumer filters, so no call is
// admitted before a consumer for it exists.)
func (d *Dispatcher) Start(ctx context.Context) error {
	recheck := make(chan struct{}, 1) // the results consumer failed
	cons, results, err := d.followResults(ctx, recheck)
	if err != nil {
		return err
	}
	stopResults := func() {
		results.Stop()
		d.deleteResultsConsumer(cons)
	}
	reaper, err := d.startReaper(ctx)
	if err != nil {
		stopResults()
		return err
	}
	mover, err := d.startMover(ctx)
	if err != nil {
		reaper.Stop()
		stopResults()
		return err
	}
	retries, err := d.serveDLQRetries(ctx)
	if err != nil {
		mover.Stop()
		reaper.Stop()
		stopResults()
		return err
	}
	d.lazyRecords.Start()
	d.load.start(ctx)
	d.mu.Lock()
	d.results, d.resultsCons, d.reaper, d.mover, d.retries = results, cons, reaper, mover, retries
	d.status = d.bus.NC.StatusChanged(nats.CONNECTED)
	var rctx context.Context
	rctx, d.stopRechecks = context.WithCancel(context.WithoutCancel(ctx))
	d.rechecksDone = make(chan struct{})
	go d.recheckOnFailures(rctx, d.status, recheck, d.rechecksDone)
	d.startSweeper()
	d.pools.start()
	d.mu.Unlock()
	return flush(ctx, d.bus.NC)
}

// Stop stops accepting calls and releases every waiting caller: each gets
// ErrStopped and can fetch the result later by call id from any replica.
func (d *Dispatcher) Stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	if d.status != nil {
		d.bus.NC.RemoveStatusListener(d.status)
		d.stopRechecks()
	}
	if d.retries != nil {
		_ = d.retries.Unsubscribe()
	}
	if d.reaper != nil {
		d.reaper.Stop()
	}
	if d.mover != nil {
		d.mover.Stop()
		d.lazyRecords.Stop()
	}
	for id, w := range d.waiters {
		close(w.ch)
		delete(d.waiters, id)
	}
	results, cons, rechecksDone := d.results, d.resultsCons, d.rechecksDone
	d.mu.Unlock()
	// Outside the lock too: each may be in a server read for seconds, and a
	// metrics scrape or a waiter's cancel takes the lock (review finding).
	d.stopSweeper()
	d.pools.end()
	d.load.stopRefresh()
	// Outside the lock: a recheck of waiters takes it, and stopping the
	// results consumer waits for an attempt to make it again (during an
	// outage, up to about 20s).
	if rechecksDone != nil {
		<-rechecksDone
	}
	if results != nil {
		results.Stop()
		d.deleteResultsConsumer(cons)
	}
}

func decodeResult(callID string, data []byte) *toolwirev1.ToolResponse {
	resp := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(data, resp); err != nil {
		return internalResponse(callID, "undecodable result: "+err.Error())
	}
	return resp
}

// wait registers the waiter of a new call (its id is fresh, so it is the
// only one); cancel removes it.
func (d *Dispatcher) wait(tenant, callID string) (*waiter, error) {
	w := &waiter{d: d, id: callID, tenant: tenant, ch: make(chan []byte, 1)}
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

// Submitted is the outcome of admission.
type Submitted struct {
	CallID string
	// Rejected is set when admission refused the call; nothing was queued.
	Rejected *toolwirev1.ToolResponse
	// Duplicate is set when the idempotency key named an earlier call.
	Duplicate bool
	// Finished is, for a Duplicate, the earlier call's terminal response
	// when it has one (its result, or its refusal); nil while it runs.
	Finished *toolwirev1.ToolResponse
}

// Submit admits and publishes one call without waiting for its result. A
// duplicate of a call that has finished carries its terminal response.
func (d *Dispatcher) Submit(ctx context.Context, id Identity, o *toolwirev1.CallRequest) (*Submitted, error) {
	s, _, err := d.submit(ctx, id, o, false)
	if err != nil || !s.Duplicate {
		return s, err
	}
	r, err := d.getResult(ctx, id, s.CallID, 0, true)
	if err != nil {
		// Still a duplicate: the caller fetches the result by id.
		d.log.WarnContext(ctx, "looking up the call of a repeated idempotency key failed", "call_id", s.CallID, "err", err)
		return s, nil
	}
	if r.State == toolwirev1.CallState_CALL_STATE_DONE {
		s.Finished = r.Response
	}
	return s, nil
}

// Call admits a call and waits up to wait (0 = the default) for its
// terminal response. When the wait ends first the state is PENDING.
func (d *Dispatcher) Call(ctx context.Context, id Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	if !o.ApplyIntents {
		return d.call(ctx, id, o, wait)
	}
	if o.Session == "" {
		return nil, ErrNoSession
	}
	resp, err := d.call(ctx, id, o, wait)
	if err != nil || resp.State != toolwirev1.CallState_CALL_STATE_DONE {
		return resp, err
	}
	// The call's own session: an idempotent repeat answered with an earlier
	// call's response applies to that call's session, never to another.
	session := cmp.Or(resp.Response.GetMeta().GetSession(), o.Session)
	sess, _, _, err := d.applier.Apply(ctx, id.Tenant, session, resp.CallId, resp.Response.GetIntents())
	if err != nil {
		// The tool ran and its response is stored: answer it, say why the
		// intents are not applied (ApplyIntents can do it later).
		d.log.WarnContext(ctx, "applying intents failed", "call_id", resp.CallId, "err", err)
		resp.ApplyError = err.Error()
		return resp, nil
	}
	resp.Session = sess
	return resp, nil
}

// ErrNoSession: intents were to be applied, but the call names no session.
var ErrNoSession = errors.New("dispatch: apply_intents needs a session")

// GetSession returns the reference applier's state of a session of the
// caller's tenant.
func (d *Dispatcher) GetSession(ctx context.Context, id Identity, session string) (*toolwirev1.Session, error) {
	if err := checkTenant(id); err != nil {
		return nil, err
	}
	if session == "" {
		return nil, ErrNoSession
	}
	return d.applier.Get(ctx, id.Tenant, session)
}

// ApplyIntents applies the intents of a finished call of the caller's
// tenant to the call's session, each once. It returns ErrUnknownCall for a
// call it does not know, ErrNotFinished while the call runs, and
// ErrNoSession when the call named no session.
func (d *Dispatcher) ApplyIntents(ctx context.Context, id Identity, callID string) (*toolwirev1.ApplyIntentsResponse, error) {
	// A caller may apply a call's intents the instant its result reached
	// it: the result can reach the caller a moment before the results
	// stream serves it, so wait briefly rather than answer "not finished".
	r, err := d.GetResult(ctx, id, callID, applyWait)
	if err != nil {
		return nil, err
	}
	switch r.State {
	case toolwirev1.CallState_CALL_STATE_DONE:
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return nil, ErrNotFinished
	default:
		return nil, ErrUnknownCall
	}
	session := r.Response.GetMeta().GetSession()
	if session == "" {
		return nil, ErrNoSession
	}
	sess, applied, skipped, err := d.applier.Apply(ctx, id.Tenant, session, callID, r.Response.GetIntents())
	if err != nil {
		return nil, fmt.Errorf("dispatch: apply intents of %s: %w", callID, err)
	}
	return &toolwirev1.ApplyIntentsResponse{Session: sess, Applied: int32(applied), Skipped: int32(skipped)}, nil
}

// applyWait bounds how long ApplyIntents waits for a result.
const applyWait = 2 * time.Second

// ErrNotFinished: the call has no result yet.
var ErrNotFinished = errors.New("dispatch: the call has not finished")

func (d *Dispatcher) call(ctx context.Context, id Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	// The caller's slot is taken before admission: a refused Call leaves
	// no trace.
	if err := d.caps.acquire(capWaiting, id, d.cfg.MaxWaitingPerCaller); err != nil {
		return nil, err
	}
	defer d.caps.release(capWaiting, id)
	s, w, err := d.submit(ctx, id, o, true)
	if err != nil {
		return nil, err
	}
	if s.Rejected != nil {
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: s.Rejected}, nil
	}
	if w == nil { // duplicate of an earlier call: wait like GetResult
		r, err := d.getResult(ctx, id, s.CallID, d.clampWait(wait), true)
		if err != nil {
			return nil, err
		}
		return &toolwirev1.CallResponse{CallId: s.CallID, State: r.State, Response: r.Response}, nil
	}
	defer w.cancel()
	timer := getTimer(d.clampWait(wait))
	defer putTimer(timer)
	select {
	case data, ok := <-w.ch:
		if !ok {
			w.accepted.Flush()
			return nil, ErrStopped
		}
		w.accepted.Stop()
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: decodeResult(s.CallID, data)}, nil
	case <-timer.C:
		w.accepted.Flush()
		// A last look before answering PENDING: the result may be stored
		// and its delivery late (a consumer being made again after a
		// failover or a reconnect).
		if data, err := d.storedResult(ctx, w.tenant, s.CallID); err == nil && data != nil {
			return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: decodeResult(s.CallID, data)}, nil
		}
		return &toolwirev1.CallResponse{CallId: s.CallID, State: toolwirev1.CallState_CALL_STATE_PENDING}, nil
	case <-ctx.Done():
		w.accepted.Flush()
		return nil, ctx.Err()
	}
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

// waiter is a caller of Call waiting for its call's result.
type waiter struct {
	d      *Dispatcher
	id     string
	tenant string
	// ch receives the stored result's bytes, or is closed when the
	// dispatcher stops.
	ch chan []byte
	// accepted publishes the admission record unless stopped first.
	accepted *lazy.Record
	ended    bool // guarded by d.mu
}

// submit is admitAndPublish observed (observe.go): the admission span and
// the admission metrics.
func (d *Dispatcher) submit(ctx context.Context, id Identity, o *toolwirev1.CallRequest, withWaiter bool) (*Submitted, *waiter, error) {
	if o == nil {
		o = &toolwirev1.CallRequest{}
	}
	if err := checkTenant(id); err != nil {
		return nil, nil, err // not even a rejection can be recorded without mapping the tenant
	}
	start := time.Now()
	ctx, span := d.startAdmission(ctx, id, o)
	s, w, err := d.admitAndPublish(ctx, id, o, withWaiter, start)
	d.endAdmission(span, s, err, start)
	return s, w, err
}

func (d *Dispatcher) admitAndPublish(ctx context.Context, id Identity, o *toolwirev1.CallRequest, withWaiter bool, now time.Time) (*Submitted, *waiter, error) {
	callID := ulid.Make().String()
	call, te := d.admit(ctx, id, o, callID, now)
	if te != nil {
		d.redactRefusal(ctx, o, te)
		resp := rejection(callID, o.Tool, te, now)
		d.event(ctx, id.Tenant, callID, &toolwirev1.CallEvent{CallId: callID, Tool: o.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
			Error: te, Caller: callerOf(id, o)})
		return &Submitted{CallID: callID, Rejected: resp}, nil, nil
	}
	var w *waiter
	if withWaiter {
		var err error
		w, err = d.wait(id.Tenant, callID)
		if errors.Is(err, errOverloaded) {
			te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, Retryable: true,
				Message:            fmt.Sprintf("this dispatcher already has %d callers waiting", d.cfg.MaxWaiting),
				PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(time.Second)}
			// Recorded like every refusal: any replica answers the id.
			d.event(ctx, id.Tenant, callID, &toolwirev1.CallEvent{CallId: callID, Tool: o.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
				Error: te, Caller: callerOf(id, o)})
			return &Submitted{CallID: callID, Rejected: rejection(callID, o.Tool, te, now)}, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if o.IdempotencyKey != "" {
		if s, done, err := d.claimKey(ctx, id, call, w); done || err != nil {
			return s, nil, err
		}
	}
	// Overload (load.go): after the key, so that a repeat of an accepted
	// call still answers that call.
	subject := d.subj.Call(call.Executor, id.Tenant, call.Provider, call.Tool)
	if te, cause, target := d.load.check(ctx, subject, o.IdempotencyKey != "", scheduleToStart(call, now)); te != nil {
		if w != nil {
			w.cancel()
		}
		if o.IdempotencyKey != "" {
			// A retry with the same key may have found the key claimed and
			// now waits on this call id: record the refusal before the key
			// is released, so that it gets this answer (overload refusals
			// of calls without a key are not stored: load.go).
			d.event(ctx, id.Tenant, callID, &toolwirev1.CallEvent{CallId: callID, Tool: o.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
				Error: te, Caller: callerOf(id, o)})
		}
		d.releaseKey(id, o)
		return d.refuseOverloaded(o, callID, te, cause, target, now), nil, nil
	}
	data, err := proto.Marshal(call)
	if err != nil {
		if w != nil {
			w.cancel()
		}
		return nil, nil, fmt.Errorf("dispatch: marshal call: %w", err)
	}
	// The call and its admission record are published back to back on one
	// connection, so the server stores the record after the call; only the
	// call's ack is awaited. A caller waiting in Call gets the record only
	// if its call outlives AcceptedRecordDelay (the result of a fast call is
	// its record); a submitted call gets it at once.
	ctx, pub := d.startPublish(ctx, subject, call)
	defer pub.end()
	// The headers jetstream.WithMsgID and WithExpectStream would set, set
	// directly: the options cost an allocation-heavy detour per call.
	hdr := pub.header
	if hdr == nil {
		hdr = make(nats.Header, 2)
	}
	hdr[jetstream.MsgIDHeader] = []string{callID}
	hdr[jetstream.ExpectedStreamHeader] = d.expectCalls
	msg := &nats.Msg{Subject: subject, Data: data, Header: hdr}
	fut, err := d.bus.JS.PublishMsgAsync(msg)
	if err != nil {
		// Never sent (e.g. too many publishes in flight): refused for sure.
		pub.fail(err)
		return d.refused(ctx, id, o, w, callID, now, err), nil, nil
	}
	if w != nil {
		w.accepted = d.lazyRecords.Add(func() { d.publishAccepted(id.Tenant, call) })
	} else {
		d.publishAccepted(id.Tenant, call)
	}
	retryUntil := time.Now().Add(publishRetryFor)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		select {
		case <-fut.Ok():
			return &Submitted{CallID: callID}, w, nil
		case err = <-fut.Err():
		case <-ctx.Done():
			// The caller left; the call may be stored: keep its key and record.
			if w != nil {
				w.accepted.Flush()
				w.cancel()
			}
			return nil, nil, ctx.Err()
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || time.Now().After(retryUntil) {
			// The server answered and refused (e.g. the stream is full), or
			// it stayed unreachable.
			pub.fail(err)
			return d.refused(ctx, id, o, w, callID, now, err), nil, nil
		}
		// No answer (timeout, reconnect): the call may or may not be
		// stored. Publish it again under the same message id: the stream's
		// duplicate window makes that store it at most once.
		d.log.InfoContext(ctx, "call publish unacknowledged; publishing again", "call_id", callID, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			if w != nil {
				w.accepted.Flush()
				w.cancel()
			}
			return nil, nil, ctx.Err()
		}
		if fut, err = d.bus.JS.PublishMsgAsync(msg); err != nil {
			pub.fail(err)
			return d.refused(ctx, id, o, w, callID, now, err), nil, nil
		}
	}
}

// publishRetryFor bounds how long an unacknowledged call publish is
// repeated (same message id) before the call is refused: long enough to
// ride out a server restart or a leader election.
const publishRetryFor = 10 * time.Second

// refused answers a call the calls stream did not take: OVERLOADED,
// retryable, recorded, with its idempotency key released.
func (d *Dispatcher) refused(ctx context.Context, id Identity, o *toolwirev1.CallRequest, w *waiter, callID string, now time.Time, err error) *Submitted {
	if w != nil {
		w.accepted.Stop()
		w.cancel()
	}
	d.releaseKey(id, o)
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, Retryable: true,
		Message:            "the call could not be queued: " + err.Error(),
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(time.Second)}
	// Recorded after any admission record, so every replica answers this id
	// with the refusal.
	d.event(ctx, id.Tenant, callID, &toolwirev1.CallEvent{CallId: callID, Tool: o.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
		Error: te, Caller: callerOf(id, o)})
	d.log.WarnContext(ctx, "publish refused; answering OVERLOADED", "call_id", callID, "err", err)
	return &Submitted{CallID: callID, Rejected: rejection(callID, o.Tool, te, now)}
}

// GetResult returns the result of callID for the caller's tenant, waiting
// up to wait for a pending call. Any replica answers for any call. A wait
// counts against Config.MaxWaitingPerCaller (ErrTooManyWaiting).
func (d *Dispatcher) GetResult(ctx context.Context, id Identity, callID string, wait time.Duration) (*toolwirev1.GetResultResponse, error) {
	if err := checkTenant(id); err != nil {
		return nil, err
	}
	if wait > 0 {
		if err := d.caps.acquire(capWaiting, id, d.cfg.MaxWaitingPerCaller); err != nil {
			return nil, err
		}
		defer d.caps.release(capWaiting, id)
	}
	return d.getResult(ctx, id, callID, wait, false)
}

// getResult is GetResult; known says the call surely exists (an
// idempotency hit whose original may still be publishing), so no events
// yet means pending, not unknown.
func (d *Dispatcher) getResult(ctx context.Context, id Identity, callID string, wait time.Duration, known bool) (*toolwirev1.GetResultResponse, error) {
	if _, err := ulid.ParseStrict(callID); err != nil {
		return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}, nil
	}
	subject := d.subj.ResultAnyDispatcher(id.Tenant, callID)
	var sub *nats.Subscription
	ch := make(chan *nats.Msg, 1)
	if wait > 0 {
		var err error
		// Subscribe first, then look: a result published in between is
		// not missed.
		sub, err = d.bus.NC.ChanSubscribe(subject, ch)
		if err != nil {
			return nil, fmt.Errorf("dispatch: subscribe result: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := flush(ctx, d.bus.NC); err != nil {
			return nil, fmt.Errorf("dispatch: flush: %w", err)
		}
	}
	resp, err := d.loadResult(ctx, subject)
	if err != nil || resp != nil {
		return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, err
	}
	last, err := bus.LastMsg(ctx, d.bus.Events, d.subj.EventsAnyDispatcher(id.Tenant, callID))
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("dispatch: look up call: %w", err)
		}
		// No record of the call. A recent id may be a call whose record is
		// not written yet; with a wait, wait anyway: the admission record of
		// a call accepted during a server outage may be missing.
		if !known && wait <= 0 && !recentID(callID) {
			return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}, nil
		}
		known = false
	} else if ev := (&toolwirev1.CallEvent{}); proto.Unmarshal(last.Data, ev) == nil && ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
		return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE,
			Response: rejection(callID, ev.Tool, ev.Error, ev.Time.AsTime())}, nil
	}
	if wait <= 0 {
		return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_PENDING}, nil
	}
	timer := time.NewTimer(min(wait, d.cfg.MaxWait))
	defer timer.Stop()
	// A result reaches core subscribers before the stream stores it, so
	// one published just before the subscription can be in neither place
	// at the first look: look again now and then while waiting.
	recheck := time.NewTicker(250 * time.Millisecond)
	defer recheck.Stop()
	for {
		select {
		case m := <-ch:
			// Only a hint: a result reaches core subscribers also when the
			// stream refuses it or never answers, and only a stored result
			// is the call's. Not stored yet: the next look finds it.
			if resp, err := d.confirmResult(ctx, m.Subject); err == nil && resp != nil {
				return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, nil
			}
		case <-recheck.C:
			if resp, err := d.loadResult(ctx, subject); err == nil && resp != nil {
				return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, nil
			}
		case <-timer.C:
			if resp, err := d.loadResult(ctx, subject); err == nil && resp != nil {
				return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}, nil
			}
			if _, err := bus.LastMsg(ctx, d.bus.Events, d.subj.EventsAnyDispatcher(id.Tenant, callID)); errors.Is(err, jetstream.ErrMsgNotFound) && !known && !recentID(callID) {
				return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}, nil
			}
			return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_PENDING}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// publishAccepted records the admission of a queued call in the events
// stream: the record is how any replica tells a pending call from an
// unknown id. It is a core publish the stream captures, sent right after
// the call on the same connection (so it is stored after the call) and
// not acknowledged: waiting for a second ack per call cost a quarter of
// the throughput. A record lost in a server outage is covered by
// GetResult, which with a wait treats a call without a record as pending
// for the wait. It reports whether the record was sent.
func (d *Dispatcher) publishAccepted(tenant string, call *toolwirev1.ToolCall) bool {
	ev := &toolwirev1.CallEvent{CallId: call.CallId, Tool: call.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED,
		Caller: call.Caller, Time: call.AcceptedAt}
	data, err := proto.Marshal(ev)
	if err != nil {
		return false
	}
	if err := d.bus.NC.Publish(d.subj.Event(tenant, d.cfg.Name, call.CallId), data); err != nil {
		d.log.Warn("admission record not sent", "call_id", call.CallId, "err", err)
		return false
	}
	return true
}

// confirmResult returns the result stored on subject, the literal subject
// of a result seen on a core subscription, or nil when none is stored.
func (d *Dispatcher) confirmResult(ctx context.Context, subject string) (*toolwirev1.ToolResponse, error) {
	m, err := d.bus.Results.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: confirm result: %w", err)
	}
	return decodeResult(subject[strings.LastIndexByte(subject, '.')+1:], m.Data), nil
}

func (d *Dispatcher) loadResult(ctx context.Context, subject string) (*toolwirev1.ToolResponse, error) {
	m, err := bus.LastMsg(ctx, d.bus.Results, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: load result: %w", err)
	}
	resp := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(m.Data, resp); err != nil {
		return nil, fmt.Errorf("dispatch: decode stored result: %w", err)
	}
	return resp, nil
}

// event records a dispatcher's event of a call and waits (at most
// eventTimeout) until the events stream has stored it: a rejection or a
// cancel request is answered only once every replica can read it back.
// These are not on the path of an admitted call.
func (d *Dispatcher) event(ctx context.Context, tenant, callID string, ev *toolwirev1.CallEvent) {
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
		_, err = d.bus.JS.Publish(ctx, d.subj.Event(tenant, d.cfg.Name, callID), data)
		cancel()
	}
	if err != nil {
		d.log.WarnContext(ctx, "event not recorded", "call_id", callID, "type", ev.Type, "err", err)
	}
}

// eventTimeout bounds how long recording a dispatcher's event may take.
const eventTimeout = 2 * time.Second

func callerOf(id Identity, o *toolwirev1.CallRequest) *toolwirev1.Caller {
	return &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent, Scopes: id.Scopes,
		Session: o.Session, User: o.User, Run: o.Run, Turn: o.Turn}
}

func preExec(t toolwirev1.ErrorType, msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: t, Message: msg, PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

func rejection(callID, tool string, te *toolwirev1.ToolError, now time.Time) *toolwirev1.ToolResponse {
	ts := timestamppb.New(now)
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: callID, Tool: tool, Ok: false, Error: te,
		Meta: &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: ts, StartedAt: ts, FinishedAt: ts, Duration: durationpb.New(0)}}
}

func internalResponse(callID, msg string) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: callID, Ok: false,
		Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: msg,
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}}
}

// flush makes sure the server has processed our subscriptions.
func flush(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return nc.FlushWithContext(ctx)
}

// recentWindow is how long after its id was minted a call without any
// record still counts as possibly pending: a call waited on in Call has
// its admission record written only after AcceptedRecordDelay.
const recentWindow = 10 * time.Second

// recentID reports whether callID was minted within recentWindow (by the
// clock of the dispatcher that admitted it).
func recentID(callID string) bool {
	u, err := ulid.ParseStrict(callID)
	if err != nil {
		return false
	}
	age := time.Since(ulid.Time(u.Time()))
	return age < recentWindow && age > -recentWindow
}

// Config returns the dispatcher's configuration, defaults filled in.
func (d *Dispatcher) Config() Config { return d.cfg }
