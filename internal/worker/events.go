package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// lastEvent returns the newest event recorded for a call, or nil.
func (w *Worker) lastEvent(ctx context.Context, call *toolwirev1.ToolCall) *toolwirev1.CallEvent {
	m, err := w.bus.Events.GetLastMsgForSubject(ctx, w.bus.Subjects.EventsAnyDispatcher(call.Caller.GetTenant(), call.CallId))
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			w.log.Warn("event lookup failed", "call_id", call.CallId, "err", err)
		}
		return nil
	}
	ev := &toolwirev1.CallEvent{}
	if proto.Unmarshal(m.Data, ev) != nil {
		return nil
	}
	if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED || ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED {
		// Admission and cancel records say nothing about attempts, and
		// come from other connections, so they may land after an attempt's
		// STARTED: look at every event.
		return w.lastAttemptEvent(ctx, call)
	}
	return ev
}

// lastAttemptEvent scans a call's events for the newest attempt event; it
// runs only for redeliveries whose newest event is not an attempt's.
func (w *Worker) lastAttemptEvent(ctx context.Context, call *toolwirev1.ToolCall) *toolwirev1.CallEvent {
	cons, err := w.bus.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{w.bus.Subjects.EventsAnyDispatcher(call.Caller.GetTenant(), call.CallId)}})
	if err != nil {
		return &toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED} // be conservative
	}
	var last *toolwirev1.CallEvent
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			break
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev := &toolwirev1.CallEvent{}
			if proto.Unmarshal(m.Data(), ev) == nil && ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED &&
				ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED {
				last = ev
			}
		}
		if n == 0 {
			break
		}
	}
	return last
}

// attemptEvent records an attempt's event. For tools that are not safe to
// rerun the event is stored durably before the attempt proceeds, so a
// crash mid-attempt is known as an unknown outcome afterwards; for safe
// tools it is a cheap best-effort publish.
func (w *Worker) attemptEvent(ctx context.Context, call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, ev *toolwirev1.CallEvent) {
	if safeToRerun(spec) {
		w.publishEvent(call, ev)
		return
	}
	ev.CallId, ev.Tool, ev.Attempt, ev.Worker = call.CallId, call.Tool, call.Attempt, w.cfg.Name
	ev.Time = timestamppb.Now()
	data, err := proto.Marshal(ev)
	if err == nil {
		_, err = w.bus.JS.Publish(ctx, w.bus.Subjects.Event(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId), data)
	}
	if err != nil {
		w.log.Warn("durable event not stored", "call_id", call.CallId, "type", ev.Type, "err", err)
	}
}

// heartbeat sends InProgress every interval until stopped.
type heartbeat struct {
	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

func startHeartbeat(msg jetstream.Msg, every time.Duration, log *slog.Logger) *heartbeat {
	h := &heartbeat{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					log.Warn("heartbeat failed", "subject", msg.Subject(), "err", err)
				}
			}
		}
	}()
	return h
}

func (h *heartbeat) stop() {
	h.once.Do(func() { close(h.done) })
	h.wg.Wait()
}
