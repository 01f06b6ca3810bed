package approvalflow

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/redact"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Ask is a call an ask decision parks.
type Ask struct {
	// Caller is who called: one holding ConfirmScope gets a token.
	Caller identity.Identity
	// Call is the call as admitted; its id is the approval id.
	Call *toolwirev1.ToolCall
	// Spec is its tool's: the arguments approvers see are redacted by
	// its secret fields.
	Spec *toolwirev1.ToolSpec
	// ArgsHash is the SHA-256 of the canonical arguments
	// (policy.Args.Hash).
	ArgsHash string
	// Decision is the policy's decision that asked.
	Decision *toolwirev1.PolicyDecision
	// Reason is what the caller is told the approval is for
	// (policy.Decision.Reason: never a rule's text).
	Reason string
	// Now is when the call was admitted.
	Now time.Time
}

// Park parks a call the policy asks about: a PENDING record in the
// approvals bucket (never a pool subject), an AWAITING_APPROVAL event,
// and the CONFIRMATION_REQUIRED answer it returns, with the approval id
// (the call's id) and, for a caller with the confirm scope, a token. A
// record the bucket does not take refuses the call (fail closed): it
// returns the refusal instead, OVERLOADED, retryable, nothing parked.
func (f *Flow) Park(ctx context.Context, a *Ask) (answer, refusal *toolwirev1.ToolError) {
	call, now := a.Call, a.Now
	rec := &approvals.Record{
		Approval: &toolwirev1.Approval{Id: call.CallId, State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Tool: call.Tool,
			SpecVersion: call.SpecVersion, Caller: call.Caller, ArgumentsJson: string(redact.ForSpec(a.Spec).Arguments(call.Arguments)),
			ArgsSha256: a.ArgsHash, Decision: a.Decision, CreatedAt: timestamppb.New(now),
			ExpiresAt: timestamppb.New(now.Add(f.cfg.TTL))},
		Call: call, Nonce: approvals.NewNonce(),
		ScheduleToStart: timeout(call.ScheduleToStartDeadline, now), ScheduleToClose: timeout(call.Deadline, now),
	}
	if err := f.store.Park(ctx, rec); err != nil {
		f.log.WarnContext(ctx, "parking a call for approval failed; refusing it", "call_id", call.CallId, "err", err)
		return nil, envelope.Overloaded("this call needs approval, and it could not be parked for an approver: "+err.Error(), 30*time.Second)
	}
	f.tracker.Note(rec)
	te := AwaitingError(rec, a.Reason)
	// The event (read by operators and Watch) never carries the token.
	f.event(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, func(ev *toolwirev1.CallEvent) {
		ev.Policy, ev.Error = a.Decision, te
	})
	if token := f.issueToken(ctx, a.Caller, rec); token != "" {
		te = proto.Clone(te).(*toolwirev1.ToolError)
		te.Approval.Token = token
		te.Suggestion += "; or, once your user confirmed it, send the same call again with approval_token"
	}
	return te, nil
}

// timeout is the time from now to a deadline; 0 without one.
func timeout(deadline *timestamppb.Timestamp, now time.Time) time.Duration {
	if deadline == nil {
		return 0
	}
	return max(deadline.AsTime().Sub(now), time.Millisecond)
}

// AwaitingError is the CONFIRMATION_REQUIRED answer of a parked call,
// without token: the approval id, its expiry and why (the decision's
// reason, never a rule's text).
func AwaitingError(rec *approvals.Record, reason string) *toolwirev1.ToolError {
	id := rec.ID()
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
		fmt.Sprintf("this call of %q needs approval: %s (approval %s)", rec.Approval.GetTool(), reason, id))
	te.Approval = &toolwirev1.ApprovalRequired{ApprovalId: id, ExpiresAt: rec.Approval.GetExpiresAt()}
	te.Suggestion = fmt.Sprintf("the call waits for an approver (scope %q): `toolctl approvals approve %s` runs it, "+
		"`toolctl approvals deny %s --reason ...` refuses it; its result is fetched by this id", ApproveScope, id, id)
	return te
}

// AwaitingResponse is the answer envelope of a parked call (not
// terminal: the state says AWAITING_APPROVAL) whose answer is te, parked
// at at.
func AwaitingResponse(callID string, call *toolwirev1.ToolCall, te *toolwirev1.ToolError, at time.Time) *toolwirev1.ToolResponse {
	return envelope.Error(callID, call.GetTool(), te, &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: timestamppb.New(at),
		SpecVersion: call.GetSpecVersion(), Session: call.GetCaller().GetSession()})
}
