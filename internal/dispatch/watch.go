package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrUnknownCall is returned by Watch for a call id nobody admitted.
var ErrUnknownCall = errors.New("dispatch: unknown call")

// Watch sends the events of a call — from its admission on, whichever
// replica admitted it — and ends with a FINISHED event carrying the
// terminal response, or with a REJECTED event. It returns when the call
// finished, ctx ended or send failed; ErrUnknownCall for an id with no
// record (one minted in the last 10s gets Config.WatchGrace to show one)
// and for a call the caller may not see (Config.AgentVisibility);
// ErrTooManyWatches when the caller already has
// Config.MaxWatchesPerCaller Watches open here.
func (d *Dispatcher) Watch(ctx context.Context, id identity.Identity, callID string, send func(*toolwirev1.CallEvent) error) error {
	if err := identity.CheckTenant(id); err != nil {
		return err
	}
	if _, err := ulid.ParseStrict(callID); err != nil {
		return ErrUnknownCall
	}
	if err := d.caps.acquire(capWatch, id, d.cfg.MaxWatchesPerCaller); err != nil {
		return err
	}
	defer d.caps.release(capWatch, id)
	if ok, err := d.reaches(ctx, id, callID); err != nil || !ok {
		return cmp.Or(err, ErrUnknownCall)
	}
	tool, err := d.callTool(ctx, id.Tenant, callID)
	if err != nil {
		return err
	}
	w := &watch{d: d, id: id, callID: callID, send: send, resultSubject: d.subj.ResultAnyDispatcher(id.Tenant, callID),
		eventsSubject: d.subj.EventsAnyDispatcher(id.Tenant, callID), tool: tool}
	return w.run(ctx)
}

// watch is one Watch stream.
type watch struct {
	d             *Dispatcher
	id            identity.Identity
	callID        string
	send          func(*toolwirev1.CallEvent) error
	resultSubject string
	eventsSubject string
	// tool is the call's (callTool): whose signatures its records need.
	tool string

	events chan *toolwirev1.CallEvent // delivered by the consumer; nil = undecodable
	sent   uint64                     // events taken from the channel
	// budgetSent: a LATENCY_BUDGET_EXCEEDED event was sent (finish).
	budgetSent bool
	// partial drops a chunk of partial output already sent (a replay).
	partial PartialSeen
}

// Watch timing. A result reaches core subscribers before the stream stores
// it, so a result published just before the Watch subscribed can be in
// neither place at the first look (a fast call leaves no other record):
// the stored result is looked up again every watchRecheck while the
// grace lasts. By then such a result is stored; later looks, every
// watchRecheckLate, only cover a result whose core message was lost (core
// delivery is at most once, e.g. across a reconnect), so no Watch waits
// for ever on a result it missed. A core message is only a hint: the
// Watch ends with the stored result, looked up on the message's subject
// at once and, when not stored yet, again after watchRecheck.
const (
	watchRecheck     = 250 * time.Millisecond
	watchRecheckLate = 30 * time.Second
	// watchInactive is the server's backstop for a Watch's consumer: it
	// deletes one left without pull requests this long (a dispatcher that
	// died mid-Watch). A Watch deletes its consumer itself when it ends.
	watchInactive = 10 * time.Second
	// watchCleanup bounds the deletion of a Watch's consumer.
	watchCleanup = 2 * time.Second
)

func (w *watch) run(ctx context.Context) error {
	d := w.d
	// Subscribe to the result first, then look: a result published after
	// the subscription is not missed; one published before it is stored
	// (looked up now and again below).
	results := make(chan *nats.Msg, 1)
	sub, err := d.bus.NC.ChanSubscribe(w.resultSubject, results)
	if err != nil {
		return fmt.Errorf("dispatch: subscribe result: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := flush(ctx, d.bus.NC); err != nil {
		return err
	}
	resp, err := d.orArchived(ctx, w.resultSubject, w.tool)(d.lookResult(ctx, w.resultSubject, w.tool))
	if err != nil {
		return err
	}
	known := resp != nil
	if !known {
		if known, err = w.hasEvents(ctx); err != nil {
			return err
		}
		if !known {
			if !d.admitted(ctx, w.id.Tenant, w.callID, w.tool) {
				return ErrUnknownCall // no consumer made for an id nobody admitted
			}
			known = true // stored or parked, no event yet
		}
	}
	// The consumer replays the stored events from the first, so it may be
	// made after the looks above without missing any.
	stop, err := w.consume(ctx)
	if err != nil {
		return err
	}
	defer stop()
	if resp != nil {
		return w.finish(ctx, resp)
	}
	return w.follow(ctx, results, known)
}

// follow sends the call's events as the consumer delivers them until the
// call's stored result (FINISHED) or a REJECTED event ends the Watch,
// looking the stored result up again as "Watch timing" says; known says
// the call has a record already.
func (w *watch) follow(ctx context.Context, results <-chan *nats.Msg, known bool) error {
	d := w.d
	grace := time.NewTimer(d.cfg.WatchGrace)
	defer grace.Stop()
	recheck := time.NewTicker(watchRecheck)
	defer recheck.Stop()
	late := false // the grace has passed: look every watchRecheckLate
	for {
		select {
		case ev := <-w.events:
			w.sent++
			known = true
			if ev == nil {
				continue
			}
			if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
				return w.emit(ev)
			}
			if err := w.emit(ev); err != nil {
				return err
			}
		case m := <-results:
			// Only a hint: a result reaches core subscribers also when the
			// stream refuses it or never answers, and only the stored
			// result is the call's. Not stored yet: look again soon.
			if resp, err := d.confirmResult(ctx, m.Subject, w.tool); err == nil && resp != nil {
				return w.finish(ctx, resp)
			}
			recheck.Reset(watchRecheck)
		case <-recheck.C:
			if resp, err := d.lookResult(ctx, w.resultSubject, w.tool); err == nil && resp != nil {
				return w.finish(ctx, resp)
			}
			if late {
				recheck.Reset(watchRecheckLate)
			}
		case <-grace.C:
			late = true
			recheck.Reset(watchRecheckLate)
			if resp, err := d.lookResult(ctx, w.resultSubject, w.tool); err == nil && resp != nil {
				return w.finish(ctx, resp)
			}
			if known {
				continue
			}
			// Still no record: nobody admitted this id (or its record was
			// lost with a server; GetResult with a wait covers that case).
			var err error
			if known, err = w.hasEvents(ctx); err != nil {
				return err
			}
			if !known {
				return ErrUnknownCall
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hasEvents reports whether the events stream holds any believed event
// of the call.
func (w *watch) hasEvents(ctx context.Context) (bool, error) {
	ev, err := w.d.lastEvent(ctx, w.id.Tenant, w.callID, w.tool)
	if err != nil {
		return false, fmt.Errorf("dispatch: look up call: %w", err)
	}
	return ev != nil, nil
}

// consume starts the ordered consumer of the call's events; stop ends it
// and deletes it on the server (an ordered consumer's Stop leaves it there
// until its inactivity threshold).
func (w *watch) consume(ctx context.Context) (stop func(), err error) {
	d := w.d
	cons, err := d.bus.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{w.eventsSubject}, InactiveThreshold: watchInactive})
	if err != nil {
		return nil, fmt.Errorf("dispatch: watch events: %w", err)
	}
	w.events = make(chan *toolwirev1.CallEvent, 64)
	done := make(chan struct{}) // unblocks the callback once the Watch ends
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := w.believedEvent(ctx, m)
		if err != nil {
			ev = nil // counted, not sent: the drain counts stored events
		}
		select {
		case w.events <- ev:
		case <-done:
		}
	})
	if err != nil {
		w.deleteConsumer(ctx, cons)
		return nil, fmt.Errorf("dispatch: watch events: %w", err)
	}
	return func() {
		close(done)
		cc.Stop()
		w.deleteConsumer(ctx, cons)
	}, nil
}

// believedEvent decodes a stored event of the call if it is believed
// (internal/believed); one that is not is counted and logged, never sent.
func (w *watch) believedEvent(ctx context.Context, m jetstream.Msg) (*toolwirev1.CallEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, recheckTimeout)
	defer cancel()
	ev, _, err := believed.CheckEvent(ctx, w.d.bus.Keys, w.callID, w.tool, m.Headers(), m.Data())
	if se := signing.AsError(err); se != nil {
		w.d.refusedResult(believed.Refused{Subject: m.Subject(), Err: se})
	}
	return ev, err
}

// deleteConsumer deletes the ordered consumer's current server consumer,
// also when ctx has ended (the caller left).
func (w *watch) deleteConsumer(ctx context.Context, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchCleanup)
	defer cancel()
	if err := w.d.bus.Events.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		w.d.log.DebugContext(ctx, "watch consumer not deleted; the server removes it when inactive", "consumer", info.Name, "err", err)
	}
}

// emit sends ev, noting a LATENCY_BUDGET_EXCEEDED event; a chunk of
// partial output already sent (PartialSeen) is dropped.
func (w *watch) emit(ev *toolwirev1.CallEvent) error {
	if w.partial.Seen(ev) {
		return nil
	}
	if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED {
		w.budgetSent = true
	}
	return w.send(ev)
}

// finish sends the events already stored, then FINISHED. A result over
// its call's latency budget (its meta says so: withBudget, measured on
// read) is preceded by a LATENCY_BUDGET_EXCEEDED event: the stored one,
// or, when the admitting replica has not stored it yet (it does so
// after the result is stored) or never will (it stopped), one made here
// from the same record.
func (w *watch) finish(ctx context.Context, resp *toolwirev1.ToolResponse) error {
	if err := w.drainEvents(ctx); err != nil {
		return err
	}
	if over := resp.GetMeta().GetLatencyBudgetExceeded(); over != nil && !w.budgetSent {
		if err := w.emit(budgetEvent(w.callID, resp.GetTool(), over)); err != nil {
			return err
		}
	}
	return w.send(&toolwirev1.CallEvent{CallId: w.callID, Tool: resp.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED,
		Time: timestamppb.Now(), Attempt: resp.GetMeta().GetAttempt(), Worker: resp.GetMeta().GetWorker(), Response: resp})
}

// drainEvents forwards what the consumer has delivered and what is still
// stored, so FINISHED comes last.
func (w *watch) drainEvents(ctx context.Context) error {
	info, err := w.d.bus.Events.Info(ctx, jetstream.WithSubjectFilter(w.eventsSubject))
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
	for w.sent < want {
		select {
		case ev := <-w.events:
			w.sent++
			idle.Reset(2 * time.Second)
			if ev == nil {
				continue
			}
			if err := w.emit(ev); err != nil {
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
