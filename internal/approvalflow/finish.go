package approvalflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// finishNow finishes the approved record rec right after its decision,
// within Config.FinishTimeout even when ctx (the approver's request) ends
// first; a failure is the sweep's to repeat.
func (f *Flow) finishNow(ctx context.Context, rec *approvals.Record) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.FinishTimeout)
	defer cancel()
	if err := f.finishApproved(fctx, rec); err != nil {
		f.log.WarnContext(ctx, "publishing an approved call failed; the approval sweep publishes it", "call_id", rec.ID(), "err", err)
	}
}

// finishApproved finishes an approved record, and is safe to repeat (the
// sweep does, for a replica that stopped half way): the nonce consumed
// for the call (a KV create; a nonce another call used refuses it), the
// APPROVED event (one per approval: its message id), the call published
// with its id as message id (a repeat within the calls stream's
// duplicate window is stored once) and its ACCEPTED record
// (Core.PublishCall), and the record marked published.
func (f *Flow) finishApproved(ctx context.Context, rec *approvals.Record) error {
	if f.cfg.BeforeFinish != nil {
		if err := f.cfg.BeforeFinish(); err != nil {
			return err
		}
	}
	tenant, callID := rec.Tenant(), rec.ID()
	if err := f.store.ConsumeNonce(ctx, tenant, rec.Binding.Nonce, callID, rec.Binding.Expires); err != nil {
		if !errors.Is(err, approvals.ErrNonceUsed) {
			return err
		}
		// One decision per record makes this impossible; were it to
		// happen, the call is answered rather than run twice.
		f.log.ErrorContext(ctx, "the nonce of an approved call was used by another call; refusing it", "call_id", callID, "err", err)
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, "its approval was used by another call")
		return f.answerRecord(ctx, rec, te)
	}
	f.event(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED, nil)
	if err := f.core.PublishCall(ctx, rec.Call); err != nil {
		return err
	}
	return f.markPublished(ctx, rec)
}

// markPublished records that rec's call (or its answer) is published. A
// record another replica changed meanwhile was marked by it.
func (f *Flow) markPublished(ctx context.Context, rec *approvals.Record) error {
	rec.Published = true
	if err := f.store.Update(ctx, rec); err != nil && !errors.Is(err, approvals.ErrConflict) {
		return err
	}
	f.tracker.Note(rec)
	return nil
}

// finishDecided finishes a denied or expired record, and is safe to
// repeat: its event (one per decision: its message id) and the call's
// terminal answer (PERMISSION_DENIED with the approver's reason,
// CANCELLED for a call its caller cancelled, or EXPIRED), then the
// record marked published.
func (f *Flow) finishDecided(ctx context.Context, rec *approvals.Record) error {
	a := rec.Approval
	var te *toolwirev1.ToolError
	switch a.GetState() {
	case toolwirev1.ApprovalState_APPROVAL_STATE_DENIED:
		f.event(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_DENIED, nil)
		if rec.CancelledBy != "" {
			te = envelope.Interrupted(fmt.Sprintf("cancelled by %s while it waited for approval; it never ran", rec.CancelledBy),
				toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE)
			break
		}
		if rec.PolicyDenied != "" && rec.DeniedAs != "" {
			te = sessionRefusal(rec)
			break
		}
		if rec.PolicyDenied != "" {
			te = envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
				fmt.Sprintf("policy denies this call of %q (the policy changed while it waited for approval; it never ran): %s",
					a.GetTool(), rec.Approval.GetReason()))
			te.Suggestion = "do not retry this call as it is; an administrator can explain the decision with `toolctl policy explain`"
			break
		}
		te = envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("an approver denied this call of %q: %s", a.GetTool(), a.GetReason()))
		te.Suggestion = "do not retry this call as it is"
	case toolwirev1.ApprovalState_APPROVAL_STATE_EXPIRED:
		f.event(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_EXPIRED, nil)
		te = envelope.Expired(fmt.Sprintf("no approver decided on this call of %q before %s; it never ran", a.GetTool(),
			a.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)))
		te.Suggestion = "call again to ask for a new approval"
	default:
		return fmt.Errorf("approvalflow: approval %s is %s, not denied or expired", rec.ID(), stateName(a.GetState()))
	}
	return f.answerRecord(ctx, rec, te)
}

// sessionRefusal is the answer of a parked call denied because of its
// session (rec.DeniedAs): it ended (SESSION_INACTIVE), or its mode now
// forbids the call (MODE_RESTRICTED), while the call waited for
// approval. A type this replica does not know is PERMISSION_DENIED.
func sessionRefusal(rec *approvals.Record) *toolwirev1.ToolError {
	t := toolwirev1.ErrorType(toolwirev1.ErrorType_value["ERROR_TYPE_"+rec.DeniedAs])
	switch t {
	case toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE:
		return envelope.PreExec(t, fmt.Sprintf("%s (while this call of %q waited for approval; it never ran)",
			rec.PolicyDenied, rec.Approval.GetTool()))
	case toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED:
		te := envelope.PreExec(t, fmt.Sprintf("%s (the session's mode changed while it waited for approval; it never ran)", rec.PolicyDenied))
		te.Suggestion = "not in this mode: the orchestrator can change the session's mode (`toolctl session mode`)"
		return te
	}
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		fmt.Sprintf("this call of %q may not run (%s): %s", rec.Approval.GetTool(), rec.DeniedAs, rec.PolicyDenied))
	te.Suggestion = "do not retry this call as it is"
	return te
}

// answerRecord publishes te as the terminal answer of rec's call
// (Core.Answer: never over a result; a repeat finds its own), then marks
// the record published.
func (f *Flow) answerRecord(ctx context.Context, rec *approvals.Record, te *toolwirev1.ToolError) error {
	call, now := rec.Call, timestamppb.Now()
	resp := envelope.Error(rec.ID(), call.GetTool(), te, &toolwirev1.ResponseMeta{Source: "dispatcher", SpecVersion: call.GetSpecVersion(),
		Session: call.GetCaller().GetSession(), AcceptedAt: call.GetAcceptedAt(), StartedAt: now, FinishedAt: now, Duration: durationpb.New(0)})
	if err := f.core.Answer(ctx, call, resp); err != nil {
		return err
	}
	return f.markPublished(ctx, rec)
}

// event records an event of rec's approval (Core.RecordEvent): its
// message id is the call id and the event type, so a decision finished
// twice (a replica, then the sweep) is recorded once; fill adds to it. A
// failure is logged.
func (f *Flow) event(ctx context.Context, rec *approvals.Record, t toolwirev1.CallEventType, fill func(*toolwirev1.CallEvent)) {
	ev := &toolwirev1.CallEvent{CallId: rec.ID(), Tool: rec.Approval.GetTool(), Type: t, Caller: rec.Call.GetCaller(),
		Approval: rec.Approval, Time: timestamppb.Now()}
	if fill != nil {
		fill(ev)
	}
	msgID := rec.ID() + "-" + strings.ToLower(strings.TrimPrefix(t.String(), "CALL_EVENT_TYPE_"))
	if err := f.core.RecordEvent(ctx, rec.Tenant(), msgID, ev); err != nil {
		f.log.WarnContext(ctx, "approval event not recorded", "call_id", rec.ID(), "type", t, "err", err)
	}
}
