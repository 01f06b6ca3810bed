package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrUnknownCall is returned by Watch for a call id nobody admitted.
var ErrUnknownCall = errors.New("dispatch: unknown call")

func decodeEvent(b []byte) (*toolwirev1.CallEvent, error) {
	ev := &toolwirev1.CallEvent{}
	return ev, proto.Unmarshal(b, ev)
}

// Watch sends the events of a call — from its admission on, whichever
// replica admitted it — and ends with a FINISHED event carrying the
// terminal response. It returns when the call finished, ctx ended or send
// failed.
func (d *Dispatcher) Watch(ctx context.Context, id Identity, callID string, send func(*toolwirev1.CallEvent) error) error {
	if err := checkTenant(id); err != nil {
		return err
	}
	if _, err := ulid.ParseStrict(callID); err != nil {
		return ErrUnknownCall
	}
	// Subscribe to the result first, then replay the events: a result
	// published in between is not missed.
	results := make(chan *nats.Msg, 1)
	sub, err := d.bus.NC.ChanSubscribe(d.subj.ResultAnyDispatcher(id.Tenant, callID), results)
	if err != nil {
		return fmt.Errorf("dispatch: subscribe result: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := flush(ctx, d.bus.NC); err != nil {
		return err
	}
	events := make(chan *toolwirev1.CallEvent, 64)
	cons, err := d.bus.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{d.subj.EventsAnyDispatcher(id.Tenant, callID)}})
	if err != nil {
		return fmt.Errorf("dispatch: watch events: %w", err)
	}
	done := make(chan struct{})
	defer close(done) // unblocks the callback once Watch returns
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := decodeEvent(m.Data())
		if err != nil {
			ev = nil // counted, not sent: the drain counts stored events
		}
		select {
		case events <- ev:
		case <-ctx.Done():
		case <-done:
		}
	})
	if err != nil {
		return fmt.Errorf("dispatch: watch events: %w", err)
	}
	defer cc.Stop()

	resp, err := d.loadResult(ctx, d.subj.ResultAnyDispatcher(id.Tenant, callID))
	if err != nil {
		return err
	}
	if resp == nil {
		if _, err := bus.LastMsg(ctx, d.bus.Events, d.subj.EventsAnyDispatcher(id.Tenant, callID)); errors.Is(err, jetstream.ErrMsgNotFound) && !recentID(callID) {
			return ErrUnknownCall
		}
	}
	var sent uint64
	finish := func(resp *toolwirev1.ToolResponse) error {
		// Send the events already stored, then FINISHED.
		if err := d.drainEvents(ctx, id, callID, events, &sent, send); err != nil {
			return err
		}
		return send(&toolwirev1.CallEvent{CallId: callID, Tool: resp.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED,
			Time: timestamppb.Now(), Attempt: resp.GetMeta().GetAttempt(), Worker: resp.GetMeta().GetWorker(), Response: resp})
	}
	if resp != nil {
		return finish(resp)
	}
	for {
		select {
		case ev := <-events:
			sent++
			if ev == nil {
				continue
			}
			if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
				return send(ev)
			}
			if err := send(ev); err != nil {
				return err
			}
		case m := <-results:
			resp := &toolwirev1.ToolResponse{}
			if err := proto.Unmarshal(m.Data, resp); err != nil {
				resp = internalResponse(callID, "undecodable result: "+err.Error())
			}
			return finish(resp)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drainEvents forwards what the consumer has delivered and what is still
// stored, so FINISHED comes last.
func (d *Dispatcher) drainEvents(ctx context.Context, id Identity, callID string, events chan *toolwirev1.CallEvent, sent *uint64, send func(*toolwirev1.CallEvent) error) error {
	info, err := d.bus.Events.Info(ctx, jetstream.WithSubjectFilter(d.subj.EventsAnyDispatcher(id.Tenant, callID)))
	want := uint64(0)
	if err == nil {
		for _, n := range info.State.Subjects {
			want += n
		}
	}
	// Stored events arrive quickly; an event that aged out after the count
	// must not hold FINISHED back for ever.
	idle := time.NewTimer(2 * time.Second)
	defer idle.Stop()
	for *sent < want {
		select {
		case ev := <-events:
			*sent++
			idle.Reset(2 * time.Second)
			if ev == nil {
				continue
			}
			if err := send(ev); err != nil {
				return err
			}
		case <-idle.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
