package dispatch

import (
	"cmp"
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// publishAccepted records the admission of a queued call in the events
// stream: the record is how any replica tells a pending call from an
// unknown id. It is a core publish the stream captures, sent right after
// the call on the same connection (so it is stored after the call) and
// not acknowledged: waiting for a second ack per call cost a quarter of
// the throughput. A record lost in a server outage is covered by
// GetResult, which with a wait treats a call without a record as pending
// for the wait. It reports whether the record was sent.
func (d *Dispatcher) publishAccepted(tenant string, call *toolwirev1.ToolCall) bool {
	return d.publishAcceptedAt(tenant, call, call.AcceptedAt)
}

// publishAcceptedAt is publishAccepted with the event's time: an approved
// call is queued when it is approved, not when it was admitted. The
// record is stored on the events subject of the call's own dispatcher
// (ToolCall.dispatcher: this replica's for a call it admitted, the
// parking replica's for a call another replica approved), where its
// workers' events are and whose name its result's subject carries: the
// overdue sweeper answers a call on the result subject of the replica
// its ACCEPTED record names.
func (d *Dispatcher) publishAcceptedAt(tenant string, call *toolwirev1.ToolCall, at *timestamppb.Timestamp) bool {
	ev := acceptedEvent(call, at)
	data, err := proto.Marshal(ev)
	if err != nil {
		return false
	}
	name := cmp.Or(call.GetDispatcher(), d.cfg.Name)
	if err := d.bus.NC.PublishMsg(d.signedEvent(d.subj.Event(tenant, name, call.CallId), ev, data)); err != nil {
		d.log.Warn("admission record not sent", "call_id", call.CallId, "err", err)
		return false
	}
	return true
}

// acceptedEvent is call's admission record (ACCEPTED) at the time at.
func acceptedEvent(call *toolwirev1.ToolCall, at *timestamppb.Timestamp) *toolwirev1.CallEvent {
	ev := &toolwirev1.CallEvent{CallId: call.CallId, Tool: call.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED,
		Caller: call.Caller, Time: at, LoopCount: call.LoopCount, Deadline: call.Deadline, SpecVersion: call.SpecVersion}
	if call.PolicyVersion != "" || call.ApprovalId != "" || call.GrantId != "" {
		ev.Policy = &toolwirev1.PolicyDecision{Outcome: toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW, Version: call.PolicyVersion,
			RuleId: call.PolicyRule, ApprovalId: call.ApprovalId, GrantId: call.GrantId}
	}
	return ev
}

// event records a dispatcher's event of a call and waits (at most
// eventTimeout) until the events stream has stored it: a rejection or a
// cancel request is answered only once every replica can read it back.
// These are not on the path of an admitted call.
func (d *Dispatcher) event(ctx context.Context, tenant, callID string, ev *toolwirev1.CallEvent) {
	d.eventOn(ctx, d.subj.Event(tenant, d.cfg.Name, callID), callID, ev)
}

// eventOn is event on subject, one of the call's events subjects; it
// reports whether the event was stored.
func (d *Dispatcher) eventOn(ctx context.Context, subject, callID string, ev *toolwirev1.CallEvent) bool {
	ev.Time = timestamppb.Now()
	ev.CallId = callID
	data, err := proto.Marshal(ev)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
		_, err = d.bus.JS.PublishMsg(ctx, d.signedEvent(subject, ev, data))
		cancel()
	}
	if err != nil {
		d.log.WarnContext(ctx, "event not recorded", "call_id", callID, "type", ev.Type, "err", err)
	}
	return err == nil
}

// eventTimeout bounds how long recording a dispatcher's event may take.
const eventTimeout = 2 * time.Second

// recordRejection records the call's refusal as its REJECTED event, with
// the policy decision that refused it (nil when another step did).
func (a *admission) recordRejection(ctx context.Context) {
	d := a.d
	// A refused request's names are whatever its caller sent (an unknown
	// tool, an over-long session): they are recorded cut (cutName), so
	// that no refusal stores, nor has indexed, more than a bounded name.
	c := callerOf(a.id, a.req)
	c.Agent, c.Session, c.User, c.Run, c.Turn = cutName(c.Agent), cutName(c.Session), cutName(c.User), cutName(c.Run), cutName(c.Turn)
	// The model, when it is a model name (the refusal may come before the
	// toolset step checks it), and the family that step derived ("" when
	// it did not run): the audit shows which model was refused.
	if m := a.req.GetModel(); len(m) <= policy.MaxModelBytes && policy.ModelNameRE.MatchString(m) {
		c.Model, c.ModelFamily = m, a.family
	}
	te := a.refusal
	if len(te.GetMessage()) > maxRejectedMessage { // it may quote them
		te = proto.CloneOf(te)
		te.Message = strings.ToValidUTF8(te.Message[:maxRejectedMessage], "") + "..."
	}
	d.event(ctx, a.id.Tenant, a.callID, &toolwirev1.CallEvent{CallId: a.callID, Tool: cutName(a.req.Tool), Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
		Error: te, Caller: c, Policy: a.pd})
}

// maxRejectedMessage bounds the refusal's message a REJECTED event
// records.
const maxRejectedMessage = 1 << 10

func callerOf(id identity.Identity, o *toolwirev1.CallRequest) *toolwirev1.Caller {
	return &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent, Scopes: id.Scopes,
		Session: o.Session, User: o.User, Run: o.Run, Turn: o.Turn}
}

// signedEvent is the message of ev (data) on subject, signed with the
// dispatcher's key (internal/signing).
func (d *Dispatcher) signedEvent(subject string, ev *toolwirev1.CallEvent, data []byte) *nats.Msg {
	return d.bus.Signer.SignedMsg(subject, signing.KindEvent, ev.GetCallId(), ev.GetAttempt(), data, nil)
}
