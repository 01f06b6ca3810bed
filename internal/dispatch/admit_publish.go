package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/envelope"
)

// publishStep publishes the admitted call (publish), holding its
// concurrency slots before the publish: a fast call's result can reach
// this replica's results consumer (which releases the slots) before the
// publish returns. A call the stream does not take gets back what it took.
func (a *admission) publishStep(ctx context.Context) verdict {
	d := a.d
	d.limitGate.Hold(a.ticket)
	v := a.publish(ctx)
	if v == refuse {
		d.limitGate.Unhold(a.callID)
		d.limitGate.GiveBack(context.WithoutCancel(ctx), a.ticket)
	}
	return v
}

// publish publishes an admitted call on the calls stream with its message
// id (the call id), sends its admission record, and awaits the call's
// acknowledgement, publishing it again under the same message id while
// it is unanswered (doc.go, "Publishing"). A call the stream refuses, or
// that stays unanswered for publishRetryFor, is refused OVERLOADED
// (refused).
func (a *admission) publish(ctx context.Context) verdict {
	d := a.d
	w, call, callID, subject := a.w, a.call, a.callID, a.subject
	data, err := proto.Marshal(call)
	if err != nil {
		if w != nil {
			w.cancel()
		}
		d.limitGate.Unhold(callID) // never published: what it took goes back
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
	if w != nil {
		w.accepted = d.delayedRecords.Add(func() { d.publishAccepted(a.id.Tenant, call) })
	} else {
		d.publishAccepted(a.id.Tenant, call)
	}
	switch err := d.awaitCall(ctx, msg, fut); {
	case err == nil:
		return a.answered(&Submitted{CallID: callID}, w, nil)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The caller left; the call may be stored: keep its key and record.
		if w != nil {
			w.accepted.Flush()
			w.cancel()
		}
		return a.answered(nil, nil, ctx.Err())
	default:
		pub.fail(err)
		return a.notQueued(ctx, err)
	}
}

// awaitCall awaits the acknowledgement of a call the calls stream was
// sent as msg (fut), publishing it again under the same message id while
// it is unanswered (doc.go, "Publishing"). It returns nil once the stream
// has stored the call, ctx's error when ctx ended first (the call may be
// stored), or the error that refused it: the server's answer, a publish
// that could not be sent, or the last error after publishRetryFor.
func (d *Dispatcher) awaitCall(ctx context.Context, msg *nats.Msg, fut jetstream.PubAckFuture) error {
	retryUntil := time.Now().Add(publishRetryFor)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		var err error
		select {
		case <-fut.Ok():
			return nil
		case err = <-fut.Err():
		case <-ctx.Done():
			return ctx.Err()
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || time.Now().After(retryUntil) {
			// The server answered and refused (e.g. the stream is full), or
			// it stayed unreachable.
			return err
		}
		// No answer (timeout, reconnect): the call may or may not be
		// stored. Publish it again under the same message id: the stream's
		// duplicate window makes that store it at most once.
		d.log.InfoContext(ctx, "call publish unacknowledged; publishing again", "call_id", msg.Header.Get(jetstream.MsgIDHeader), "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		if fut, err = d.bus.JS.PublishMsgAsync(msg); err != nil {
			return err
		}
	}
}

// publishRetryFor bounds how long an unacknowledged call publish is
// repeated (same message id) before the call is refused: long enough to
// ride out a server restart or a leader election. An election after a
// leader's crash takes 4 to 9 s, and a client of a silent server leaves it
// after 6 to 9 s (bus.Dial): with 10 s, calls were refused although the
// cluster was back a second later.
const publishRetryFor = 15 * time.Second

// notQueued refuses a call the calls stream did not take: OVERLOADED,
// retryable, recorded after any admission record (so every replica
// answers this id with the refusal), its idempotency key released.
func (a *admission) notQueued(ctx context.Context, err error) verdict {
	d := a.d
	d.log.WarnContext(ctx, "publish refused; answering OVERLOADED", "call_id", a.callID, "err", err)
	return a.refused(envelope.Overloaded("the call could not be queued: "+err.Error(), time.Second), nil)
}
