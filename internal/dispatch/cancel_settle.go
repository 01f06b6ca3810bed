package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callHistory is what a cancel reads of a call's stored events (doc.go,
// "Cancel and Watch").
type callHistory struct {
	// admitter is the subject token of the dispatcher whose believed
	// ACCEPTED record the call has ("" = none): the call's events and
	// result subjects name it, and its workers read the former.
	admitter string
	// parker is the subject token of the dispatcher whose believed
	// AWAITING_APPROVAL record the call has ("" = none).
	parker string
	// accepted, spec and session are the ACCEPTED record's.
	accepted *timestamppb.Timestamp
	spec     string
	session  string
	// attempted: a believed attempt event (STARTED, PROGRESS, RETRYING,
	// FINISHED) is stored; cancelRequested: a CANCEL_REQUESTED is, on
	// the admitter's subject (where the call's workers read it back);
	// approval: an approval was asked for it (an approved call's ACCEPTED
	// record was its approver's in records stored before approvers
	// stored it on the call's own dispatcher's subject).
	attempted, cancelRequested, approval bool
}

// errLongHistory says a call has more events than a cancel reads.
var errLongHistory = errors.New("dispatch: more events than a cancel reads")

// readHistory reads the believed events of call callID of tenant (of
// tool), from the events stream's leader, subject by subject in the
// order of their names and each subject's oldest first (not in stream
// order: bus.EachMsgFromLeader); at most believed.MaxScan of them (more
// is errLongHistory). So admitter and parker are those of the first
// such record by subject name, not the oldest: harmless, as only an
// approved call can have records of either kind on two subjects, and
// cancelSubject reads its approval record and settleCancelled leaves it
// alone.
func (d *Dispatcher) readHistory(ctx context.Context, tenant, callID, tool string) (callHistory, error) {
	var h callHistory
	var checkErr error
	var cancelsOn []string
	prefix := d.subj.Prefix + ".event." + bus.Token(tenant) + "."
	tokenOf := func(subject string) string {
		rest, _ := strings.CutPrefix(subject, prefix)
		tok, _, _ := strings.Cut(rest, ".")
		return tok
	}
	n, err := bus.EachMsgFromLeader(ctx, d.bus.JS, d.bus.Events, d.subj.EventsAnyDispatcher(tenant, callID), believed.MaxScan,
		func(m *jetstream.RawStreamMsg) bool {
			ev, err := d.checkEvent(ctx, callID, tool, m)
			if err != nil {
				checkErr = err
				return false
			}
			switch t := ev.GetType(); {
			case ev == nil:
			case t == toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED:
				if h.admitter == "" {
					h.admitter, h.accepted, h.spec, h.session = tokenOf(m.Subject), ev.GetTime(), ev.GetSpecVersion(), ev.GetCaller().GetSession()
				}
			case t == toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED:
				cancelsOn = append(cancelsOn, tokenOf(m.Subject))
			case t == toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, t == toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS,
				t == toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING, t == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED:
				h.attempted = true
			case t == toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL:
				h.approval = true
				if h.parker == "" {
					h.parker = tokenOf(m.Subject)
				}
			case t == toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED,
				t == toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_DENIED, t == toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_EXPIRED:
				h.approval = true
			}
			return true
		})
	if err == nil && checkErr == nil && n >= believed.MaxScan {
		err = errLongHistory
	}
	h.cancelRequested = h.admitter != "" && slices.Contains(cancelsOn, h.admitter)
	return h, errors.Join(err, checkErr)
}

// cancelSubject is the events subject a cancel request of the call is
// recorded on: the one its workers store their STARTED on and read back
// before a tool that is not safe to rerun runs (a cancel stored before
// it wins: internal/worker, claim.go). For a call that was parked, that
// of the dispatcher its approval record's call names (ToolCall.
// dispatcher: the parking replica's, or the redeeming one's for a
// redeemed approval token), or of its AWAITING_APPROVAL record when the
// record cannot be read; else of its ACCEPTED record: the admitting
// replica's, read from the leader — not that of the call's newest event,
// which another replica may have written (a latency budget's overrun).
// Without either record (unreadable events, none stored yet) it is that
// of the call's newest event, stored on subject at, or this replica's
// (at "": the call has no event).
// settleCancelled answers a call only when its cancel request is on its
// admission record's subject.
func (d *Dispatcher) cancelSubject(ctx context.Context, q eventQuery, at string) string {
	tenant, callID := q.tenant, q.callID
	if at != "" {
		if h, err := d.readHistory(ctx, tenant, callID, q.tool); err == nil {
			switch {
			case h.parker != "":
				// The call its approval published names its dispatcher:
				// the parking replica's, or, for a redeemed token, the
				// redeeming replica's.
				if rec, err := d.approvals.Record(ctx, tenant, callID); err == nil && rec.Call.GetDispatcher() != "" {
					return d.subj.Event(tenant, rec.Call.GetDispatcher(), callID)
				}
				return d.subj.Event(tenant, h.parker, callID)
			case h.admitter != "":
				return d.subj.Event(tenant, h.admitter, callID)
			}
		}
	}
	rest, ok := strings.CutPrefix(at, d.subj.Prefix+".event."+bus.Token(tenant)+".")
	if tok, _, found := strings.Cut(rest, "."); ok && found && tok != "" {
		return d.subj.Event(tenant, tok, callID)
	}
	return d.subj.Event(tenant, d.cfg.Name, callID)
}

// cancelled is a call a Cancel asked to stop (of tool, with reason).
type cancelled struct{ callID, tool, reason string }

// settleCancelled answers call c (of id's tenant) CANCELLED at cancel time
// when no attempt of it started: its events, read after its
// CANCEL_REQUESTED was stored on the admitting replica's subject, show
// the admission and that request and no attempt event. From then on no
// attempt runs: a worker that takes the call finds the tombstone, or — a
// tool that is not safe to rerun — stores its STARTED after the request
// and reads the request back before it runs (internal/worker: claim.go).
// A tool that is safe to rerun stores no STARTED before a short attempt,
// so it may have started: a read-only one's answer says effects NONE
// (it has none), an idempotent one's UNKNOWN. Anything else (an attempt
// recorded, no admission record, a call that was parked for approval,
// events that cannot be read) is left to
// the worker, which answers when its attempt ends or when it takes the
// call. The answer is published as workers publish theirs, first believed
// wins: a worker's result for the call is refused and the worker keeps
// this one (one terminal record).
func (d *Dispatcher) settleCancelled(ctx context.Context, id identity.Identity, c cancelled) {
	callID, tool, reason := c.callID, c.tool, c.reason
	h, err := d.readHistory(ctx, id.Tenant, callID, tool)
	if err != nil {
		d.log.WarnContext(ctx, "cancelled call left to its worker: its events could not be read", "call_id", callID, "err", err)
		return
	}
	if !h.cancelRequested || h.attempted || h.approval || h.admitter == "" {
		return
	}
	entry, err := d.reg.GetVersion(ctx, tool, h.spec)
	if err != nil {
		d.log.InfoContext(ctx, "cancelled call left to its worker: its spec version is not known here", "call_id", callID, "err", err)
		return
	}
	msg := "cancelled by " + id.Agent
	if reason != "" {
		msg += ": " + reason
	}
	msg += " before it started"
	fx := toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	if a := entry.Spec.GetAnnotations(); !a.GetReadOnly() && a.GetIdempotent() {
		msg += " (no attempt was recorded, but an attempt of an idempotent tool records its start only once it has run a while: one may have started; calling again is safe)"
		fx = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
	}
	now := timestamppb.New(time.Now())
	meta := &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: h.accepted, StartedAt: now, FinishedAt: now,
		Duration: durationpb.New(0), SpecVersion: h.spec, Session: h.session}
	resp := envelope.Cancelled(callID, tool, envelope.Cancel{By: id.Agent, Reason: reason, Message: msg, SideEffects: fx}, meta)
	if err := d.publishAnswer(ctx, id.Tenant, h.admitter, resp); err != nil {
		d.log.WarnContext(ctx, "cancelled call left to its worker: its answer was not stored", "call_id", callID, "err", err)
	}
}

// publishAnswer publishes resp, this replica's answer to a call of tenant
// admitted by the replica whose subject token is admitter, as workers
// publish results (first believed wins: a result already stored is kept,
// and is no error).
func (d *Dispatcher) publishAnswer(ctx context.Context, tenant, admitter string, resp *toolwirev1.ToolResponse) error {
	data, err := proto.Marshal(resp)
	if err != nil {
		return err
	}
	subject := d.subj.Result(tenant, admitter, resp.GetCallId())
	msg := d.bus.Signer.SignedMsg(subject, signing.KindResult, resp.GetCallId(), resp.GetMeta().GetAttempt(), data, nil)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
	defer cancel()
	if _, err := d.answers().Publish(ctx, msg, resp.GetTool()); err != nil && !bus.IsWrongLastSequence(err) {
		return fmt.Errorf("dispatch: publish answer of %s: %w", resp.GetCallId(), err)
	}
	return nil
}
