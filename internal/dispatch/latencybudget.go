package dispatch

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Soft latency budgets (doc.go, "Latency budgets"): admission resolves
// the budget a call is held to (the spec's and the policy's, the tightest
// that applies) and this replica watches the call; its results consumer
// measures the call when its believed result is stored and, when it took
// longer, records the overrun: the answer's meta, an event on the call's
// timeline, a WARN log and a metric. Never a failure.

// maxWatchedCalls bounds the calls a replica watches at once: the watch
// keeps the last maxWatchedCalls calls admitted here, and adding one more
// forgets the oldest still watched (its result may never come here, or
// come late). Adding costs the same full or not: the results consumer
// takes the same lock.
const maxWatchedCalls = 1 << 16

// latencyWatch holds the budgets of the calls this replica admitted and
// has not seen the result of, by call id.
type latencyWatch struct {
	mu    sync.Mutex
	calls map[string]watchedCall
	// order holds the ids added, oldest at next once it is full (a ring
	// of maxWatchedCalls): every watched call has its place in it, so
	// calls never outgrows it. The place of a call taken stays until it
	// is reused.
	order []string
	next  int
}

// watchedCall is a call held to a budget.
type watchedCall struct {
	tenant, tool string
	accepted     time.Time // ToolCall.accepted_at: this replica's clock
	budget       policy.LatencyBudget
}

// add watches callID; when the watch is full it forgets the oldest call
// added, returning its id if it was still watched ("" otherwise).
func (lw *latencyWatch) add(callID string, c watchedCall) (forgot string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.calls == nil {
		lw.calls = map[string]watchedCall{}
	}
	if len(lw.order) < maxWatchedCalls {
		lw.order = append(lw.order, callID)
	} else {
		old := lw.order[lw.next]
		if _, ok := lw.calls[old]; ok {
			delete(lw.calls, old)
			forgot = old
		}
		lw.order[lw.next] = callID
		lw.next = (lw.next + 1) % maxWatchedCalls
	}
	lw.calls[callID] = c
	return forgot
}

// watched returns the watched call callID, leaving it watched.
func (lw *latencyWatch) watched(callID string) (watchedCall, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	c, ok := lw.calls[callID]
	return c, ok
}

// take returns the watched call callID and stops watching it, if the
// call is one whose result is stored on subject (its tenant's result
// subject on this replica): a result stored on another tenant's subject
// leaves the call watched.
func (d *Dispatcher) takeWatched(callID, subject string) (watchedCall, bool) {
	lw := &d.latency
	lw.mu.Lock()
	defer lw.mu.Unlock()
	c, ok := lw.calls[callID]
	if !ok || subject != d.subj.Result(c.tenant, d.cfg.Name, callID) {
		return watchedCall{}, false
	}
	delete(lw.calls, callID)
	return c, true
}

// forget stops watching callID (a call never queued).
func (lw *latencyWatch) forget(callID string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	delete(lw.calls, callID)
}

// admittedBudget is the record of the latency budget call was admitted
// with (ToolCall.latency_budget, set by the latency step); false when it
// has none.
func admittedBudget(call *toolwirev1.ToolCall) (watchedCall, bool) {
	b := call.GetLatencyBudget()
	if b == nil {
		return watchedCall{}, false
	}
	return watchedCall{tenant: call.GetCaller().GetTenant(), tool: call.GetTool(), accepted: call.GetAcceptedAt().AsTime(),
		budget: policy.LatencyBudget{Soft: b.GetSoft().AsDuration(), Source: b.GetSource(), Entry: b.GetEntry(),
			PolicyVersion: b.GetPolicyVersion(), Mode: b.GetMode()}}, true
}

// callLatencyBudget is b as the call carries it.
func callLatencyBudget(b policy.LatencyBudget) *toolwirev1.CallLatencyBudget {
	return &toolwirev1.CallLatencyBudget{Soft: durationpb.New(b.Soft), Source: b.Source, Entry: b.Entry,
		PolicyVersion: b.PolicyVersion, Mode: b.Mode}
}

// overrun is the record of c's overrun when its result stored at stored
// came after its budget; nil when it did not.
func (c watchedCall) overrun(stored time.Time) *toolwirev1.LatencyBudgetExceeded {
	elapsed := stored.Sub(c.accepted)
	if elapsed <= c.budget.Soft {
		return nil
	}
	return &toolwirev1.LatencyBudgetExceeded{Budget: durationpb.New(c.budget.Soft), Elapsed: durationpb.New(elapsed),
		Source: c.budget.Source, Entry: c.budget.Entry, PolicyVersion: c.budget.PolicyVersion, Mode: c.budget.Mode}
}

// withBudget sets the meta of s's result (a read's) when its call took
// longer than the budget it was admitted with, as this replica knows the
// call (callTools: the calls it admitted or looked up): every read of a
// call's result says what the answer in Call said. Measured as
// checkLatency does, from accepted_at to the result's storage.
func (d *Dispatcher) withBudget(s *believed.Stored) {
	if s == nil || s.Resp == nil || s.Msg == nil {
		return
	}
	callID := s.Msg.Subject[strings.LastIndexByte(s.Msg.Subject, '.')+1:]
	if c, ok := d.tools.budget(callID); ok && bus.SubjectMatches(d.subj.ResultAnyDispatcher(c.tenant, callID), s.Msg.Subject) {
		setOverrun(s.Resp, c.overrun(s.Msg.Time))
	}
}

// setOverrun records over in resp's meta; nothing when over is nil.
func setOverrun(resp *toolwirev1.ToolResponse, over *toolwirev1.LatencyBudgetExceeded) {
	if over == nil {
		return
	}
	if resp.Meta == nil {
		resp.Meta = &toolwirev1.ResponseMeta{}
	}
	resp.Meta.LatencyBudgetExceeded = over
}

// checkLatency measures call callID whose believed result resp was
// stored on subject at stored (the results stream's timestamp): an
// overrun is set in resp's meta (the answer a waiter gets) and, for a
// call this replica watches (taken from the watch: once per call), is
// recorded as an event on the call's timeline, a WARN log and
// toolwire_latency_budget_exceeded_total. It runs on the results
// consumer's goroutine (and the recheck's), so the event is a core
// publish the events stream captures, not awaited.
func (d *Dispatcher) checkLatency(callID, subject string, stored time.Time, resp *toolwirev1.ToolResponse) {
	c, watched := d.takeWatched(callID, subject)
	if !watched {
		d.withBudget(&believed.Stored{Msg: &jetstream.RawStreamMsg{Subject: subject, Time: stored}, Resp: resp})
		return
	}
	over := c.overrun(stored)
	if over == nil {
		return
	}
	setOverrun(resp, over)
	d.metrics.LatencyBudgetExceeded(c.tool, c.budget.Source, c.budget.Mode)
	meta := resp.GetMeta()
	d.log.Warn("call over its latency budget", "call_id", callID, "tenant", c.tenant, "tool", c.tool,
		"budget", c.budget.Soft, "elapsed", over.Elapsed.AsDuration(), "source", c.budget.Source, "entry", c.budget.Entry,
		"mode", c.budget.Mode, "ok", resp.GetOk(), "attempt", meta.GetAttempt(), "worker", meta.GetWorker(),
		"worker_duration", meta.GetDuration().AsDuration())
	ev := budgetEvent(callID, c.tool, over)
	data, err := proto.Marshal(ev)
	if err == nil {
		err = d.bus.NC.PublishMsg(d.signedEvent(d.subj.Event(c.tenant, d.cfg.Name, callID), ev, data))
	}
	if err != nil {
		d.log.Warn("latency budget event not sent", "call_id", callID, "err", err)
	}
}

// budgetEvent is the LATENCY_BUDGET_EXCEEDED event of call callID of
// tool, over its budget as over says.
func budgetEvent(callID, tool string, over *toolwirev1.LatencyBudgetExceeded) *toolwirev1.CallEvent {
	return &toolwirev1.CallEvent{CallId: callID, Tool: tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED,
		Time: timestamppb.Now(), LatencyBudgetExceeded: over, Message: budgetMessage(over)}
}

// budgetMessage is the event's line for people.
func budgetMessage(o *toolwirev1.LatencyBudgetExceeded) string {
	by := o.GetSource()
	if o.GetEntry() != "" {
		by += " " + o.GetEntry()
	}
	return fmt.Sprintf("took %s, over its soft latency budget of %s (%s)",
		o.GetElapsed().AsDuration().Round(time.Millisecond), o.GetBudget().AsDuration(), by)
}
