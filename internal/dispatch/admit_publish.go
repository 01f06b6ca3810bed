package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// publishStep publishes the admitted call (publish), holding its
// concurrency slots before the publish: a fast call's result can reach
// this replica's results consumer (which releases the slots) before the
// publish returns. A call the stream does not take gets back what it took.
// A delegated call whose parent was cancelled while it was in admission
// is refused CANCELLED here (cancelDescendants tombstones it too).
func (a *admission) publishStep(ctx context.Context) verdict {
	d := a.d
	if te := a.parentGone(ctx); te != nil {
		d.latency.forget(a.callID) // never queued: nothing to measure
		d.limitGate.GiveBack(context.WithoutCancel(ctx), a.ticket)
		return a.refused(te, nil)
	}
	d.limitGate.Hold(a.ticket)
	d.tools.putCall(toolKey(a.id.Tenant, a.callID), a.call) // whose results its GetResult, Watch and Cancel believe (callTool), and its budget
	if d.cfg.AgentVisibility == identity.VisibilityOwn {
		d.owners.put(toolKey(a.id.Tenant, a.callID), a.id.Agent) // who may see it (reaches; read under own only)
	}
	v := a.publish(ctx)
	if v == refuse {
		d.latency.forget(a.callID) // never queued: nothing to measure
		d.limitGate.Unhold(a.callID)
		d.limitGate.GiveBack(context.WithoutCancel(ctx), a.ticket)
	}
	return v
}

// publish publishes an admitted call on the calls stream with its message
// id (the call id), sends its admission record, and awaits the call's
// acknowledgement, publishing it again under the same message id while
// it is unanswered (doc.go, "Publishing"). A call the stream refuses, or
// that stays unanswered for Config.PublishHorizon, is answered as
// awaitCall says: refused OVERLOADED (notQueued) or accepted and
// unconfirmed (unconfirmedCall).
func (a *admission) publish(ctx context.Context) verdict {
	d := a.d
	w, call, callID, subject := a.w, a.call, a.callID, a.subject
	data, err := proto.Marshal(call)
	if err != nil {
		if w != nil {
			w.cancel()
		}
		d.latency.forget(callID)   // never published: nothing to measure
		d.limitGate.Unhold(callID) // and what it took goes back
		d.limitGate.GiveBack(context.WithoutCancel(ctx), a.ticket)
		return a.answered(nil, nil, fmt.Errorf("dispatch: marshal call: %w", err))
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
		return a.notQueued(ctx, err)
	}
	a.published = true
	if w != nil {
		w.accepted = d.delayedRecords.Add(func() { d.publishAccepted(a.id.Tenant, call) })
	} else {
		d.publishAccepted(a.id.Tenant, call)
	}
	late, err := d.awaitCall(ctx, msg, fut)
	switch {
	case err == nil:
		if late { // an earlier publish went unanswered: its record may be lost too
			d.unconfirmed.record(unconfirmed{msg: msg, tenant: a.id.Tenant, call: call})
		}
		d.tools.stored(toolKey(a.id.Tenant, callID), call.GetDispatcher()) // a parent of calls to come (parentsSeen)
		return a.answered(&Submitted{CallID: callID}, w, nil)
	case errors.Is(err, errUnconfirmed):
		// The call may be stored and run: it is accepted, never refused.
		pub.fail(err)
		return a.unconfirmedCall(ctx, msg, err)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The caller left; the call may be stored: keep its key and
		// record, and publish it until the stream says it has it.
		if w != nil {
			w.accepted.Flush()
			w.cancel()
		}
		d.handOver(ctx, a, msg)
		// With its id, so that the caller can fetch its result or cancel it.
		return a.answered(&Submitted{CallID: callID, Unconfirmed: true}, nil, ctx.Err())
	default:
		pub.fail(err)
		return a.notQueued(ctx, err)
	}
}

// unconfirmedCall answers a call whose publish the stream had not
// acknowledged by the horizon: accepted (Submitted.Unconfirmed), with
// its id, since it may be stored; the republisher goes on publishing it.
// A waiting caller keeps waiting for its result.
func (a *admission) unconfirmedCall(ctx context.Context, msg *nats.Msg, err error) verdict {
	d := a.d
	d.log.WarnContext(ctx, "call publish unconfirmed at the horizon; answered accepted, publishing on", "call_id", a.callID, "err", err)
	if a.w != nil {
		a.w.accepted.Flush()
	}
	d.handOver(ctx, a, msg)
	return a.answered(&Submitted{CallID: a.callID, Unconfirmed: true}, a.w, nil)
}

// handOver gives a call whose publish is unconfirmed to the republisher.
func (d *Dispatcher) handOver(ctx context.Context, a *admission, msg *nats.Msg) {
	u := unconfirmed{msg: msg, tenant: a.id.Tenant, call: a.call, until: d.unconfirmedUntil(a.call)}
	if !d.unconfirmed.add(u) {
		d.log.WarnContext(ctx, "unconfirmed call not republished (stopping, or too many); the overdue sweeper answers it", "call_id", a.callID)
	}
}

// errUnconfirmed: the calls stream did not acknowledge a call by the
// horizon, after a publish that went unanswered: it may be stored.
var errUnconfirmed = errors.New("dispatch: call publish unconfirmed")

// awaitCall awaits the acknowledgement of a call the calls stream was
// sent as msg (fut), publishing it again under the same message id while
// it is unanswered (doc.go, "Publishing"); late reports that a publish
// went unanswered on the way (what was sent beside it, the admission
// record, may be lost). It returns nil once the stream
// has stored the call; ctx's error when ctx ended first (the call may be
// stored); errUnconfirmed (wrapping the last error) when, at the horizon
// (Config.PublishHorizon), a publish had gone unanswered, so that the call may
// be stored; otherwise the error that refused it: the server's answer to
// the first publish, or no stream at all (no responders) until the
// horizon. Once a publish went unanswered, a server's refusal of a later
// one proves nothing (the earlier may be stored: duplicates are checked
// after limits) and neither does 10158 ("duplicate message id is in
// process": it is being stored): only an acknowledgement ends the wait.
func (d *Dispatcher) awaitCall(ctx context.Context, msg *nats.Msg, fut jetstream.PubAckFuture) (late bool, err error) {
	retryUntil := time.Now().Add(d.cfg.PublishHorizon)
	unanswered := false
	for backoff := 50 * time.Millisecond; ; backoff = min(max(2*backoff, 50*time.Millisecond), time.Second) {
		select {
		case <-fut.Ok():
			return unanswered, nil
		case err = <-fut.Err():
		case <-*d.reconnected.Load():
			// Reconnected, maybe to another server: what was sent on the
			// old connection may never be answered. Send it again now.
			err, backoff = errReconnected, 0
		case <-ctx.Done():
			return unanswered, ctx.Err()
		}
		var apiErr *jetstream.APIError
		answered := errors.As(err, &apiErr) && apiErr.ErrorCode != jsDuplicateInProcess
		if answered && !unanswered {
			return false, err // the server refused the only call it could have stored
		}
		unanswered = unanswered || !(answered || errors.Is(err, jetstream.ErrNoStreamResponse))
		if !answered && err != errReconnected && d.cfg.ConnHealth != nil {
			d.cfg.ConnHealth.Report(err) // the server may be to blame: probe it now
		}
		if time.Now().After(retryUntil) {
			if unanswered {
				return true, fmt.Errorf("%w: %w", errUnconfirmed, err)
			}
			return false, err // no stream answered any publish: none is stored
		}
		d.log.InfoContext(ctx, "call publish unacknowledged; publishing again", "call_id", msg.Header.Get(jetstream.MsgIDHeader), "err", err)
		if backoff > 0 {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return unanswered, ctx.Err()
			}
		}
		if fut, err = d.bus.JS.PublishMsgAsync(msg); err != nil {
			if !unanswered {
				return false, err // never sent, and nothing before it could be stored
			}
			fut = failedFuture(err)
		}
	}
}

// errReconnected: the connection came back while a publish awaited its
// acknowledgement (it may or may not have been stored).
var errReconnected = errors.New("dispatch: reconnected while awaiting the acknowledgement")

// jsDuplicateInProcess is the server's error code for a publish whose
// message id another publish is storing right now (JSStreamDuplicateMessageConflict).
const jsDuplicateInProcess = 10158

// notQueued refuses a call the calls stream did not take: OVERLOADED,
// retryable, recorded after any admission record (so every replica
// answers this id with the refusal), its idempotency key released. A
// stream that is full (bus.StoreFull: it filled since its use was last
// read) refuses it as a full store does (poolview.FullRefusal, retry_after
// 30s), counted as a store refusal, and recorded all the same: its
// admission record may be out.
func (a *admission) notQueued(ctx context.Context, err error) verdict {
	d := a.d
	if bus.StoreFull(err) {
		d.log.DebugContext(ctx, "publish refused: the calls stream is full; answering OVERLOADED", "call_id", a.callID, "err", err)
		a.overloaded, a.target, a.sent = telemetry.OverloadStore, callsStore, true
		return a.refused(poolview.FullRefusal(callsStore), nil)
	}
	d.log.WarnContext(ctx, "publish refused; answering OVERLOADED", "call_id", a.callID, "err", err)
	return a.refused(envelope.Overloaded("the call could not be queued: "+err.Error(), time.Second), nil)
}

// callsStore is the calls stream's name among the stores
// (bus.Config.Stores).
const callsStore = "calls"

// failedFuture is a publish that could not be sent: its error at once.
func failedFuture(err error) jetstream.PubAckFuture {
	ch := make(chan error, 1)
	ch <- err
	return failed{err: ch}
}

type failed struct{ err chan error }

func (f failed) Ok() <-chan *jetstream.PubAck { return nil }
func (f failed) Err() <-chan error            { return f.err }
func (f failed) Msg() *nats.Msg               { return nil }

// parentGone is the refusal of a delegated call whose parent has been
// cancelled since the delegation step looked (nil for another call).
func (a *admission) parentGone(ctx context.Context) *toolwirev1.ToolError {
	if a.chain == nil {
		return nil
	}
	return a.parentTombstone(ctx, a.chain.Parent)
}
