package approvalflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// issueToken returns a signed approval token for rec when the dispatchers
// hold token keys and the caller holds the confirm scope; "" otherwise.
func (f *Flow) issueToken(ctx context.Context, id identity.Identity, rec *approvals.Record) string {
	if f.cfg.TokenKeys == nil || !registry.HasScopes(id.Scopes, []string{ConfirmScope}) {
		return ""
	}
	a := rec.Approval
	token, err := f.cfg.TokenKeys.Sign(&policy.Approval{ID: a.GetId(), Tenant: a.GetCaller().GetTenant(), Agent: a.GetCaller().GetAgent(),
		Session: a.GetCaller().GetSession(), Tool: a.GetTool(), SpecVersion: a.GetSpecVersion(), ArgsSHA256: a.GetArgsSha256(),
		Expires: a.GetExpiresAt().AsTime(), Nonce: rec.Nonce})
	if err != nil {
		f.log.ErrorContext(ctx, "signing an approval token failed; answering without one", "call_id", a.GetId(), "err", err)
		return ""
	}
	return token
}

// VerifyToken checks an approval token presented with a call of tool
// before the decision: the dispatchers hold keys, the caller may present
// tokens (the confirm scope), and the token's MAC is right
// (approvals.Keys.Verify). The binding it returns is then checked against
// the call by the policy's Decide; a token that fails here is answered
// with the refusal (TokenRefused).
func (f *Flow) VerifyToken(id identity.Identity, tool, token string) (*policy.Approval, *toolwirev1.ToolError) {
	switch {
	case f.cfg.TokenKeys == nil:
		return nil, TokenRefused(tool, "this installation issues no approval tokens")
	case !registry.HasScopes(id.Scopes, []string{ConfirmScope}):
		return nil, TokenRefused(tool, fmt.Sprintf("presenting one needs the %q scope", ConfirmScope))
	}
	a, err := f.cfg.TokenKeys.Verify(token)
	if err != nil {
		return nil, TokenRefused(tool, "it is not a valid token (altered, forged, or signed with a key no longer in use)")
	}
	return a, nil
}

// TokenRefused is the answer to a call of tool whose approval token does
// not let it run, for the reason why: CONFIRMATION_REQUIRED, nothing
// parked or queued.
func TokenRefused(tool, why string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
		fmt.Sprintf("the approval token presented with this call of %q was refused: %s", tool, why))
	te.Suggestion = "send the call without a token to ask for a new approval"
	return te
}

// Redemption is a call an approval token covers: the policy's Decide
// checked the token's binding against it.
type Redemption struct {
	// Caller is who presented the token.
	Caller identity.Identity
	// Token is the token's verified binding (VerifyToken): its approval
	// is the parked call's.
	Token *policy.Approval
	// Call is the call presented, its id already the parked call's
	// (Token.ID).
	Call *toolwirev1.ToolCall
	// ArgsHash is the SHA-256 of its canonical arguments.
	ArgsHash string
	// Now is when it was admitted.
	Now time.Time
}

// Redeem runs a call an approval token covers: the record of the parked
// call is approved by the caller's own confirmation (a compare-and-set:
// a token or approval used once), its nonce consumed, and the call
// published as the parked one. The call is the one presented (the same
// tool, version, caller and arguments, bound by the token), with its own
// fresh deadlines. It returns the refusal of a call that may not run
// (CONFIRMATION_REQUIRED, or OVERLOADED when the bucket fails), nil once
// the call is approved; a publish that fails then is the sweep's to
// repeat.
func (f *Flow) Redeem(ctx context.Context, r *Redemption) (refusal *toolwirev1.ToolError) {
	call, tool := r.Call, r.Call.Tool
	rec, err := f.store.Get(ctx, r.Caller.Tenant, r.Token.ID)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return TokenRefused(tool, "its approval no longer exists")
	case err != nil:
		f.log.WarnContext(ctx, "reading an approval failed", "approval_id", r.Token.ID, "err", err)
		return envelope.Overloaded("the approval of this token could not be read: "+err.Error(), time.Second)
	case rec.Decided():
		return TokenRefused(tool, fmt.Sprintf("its approval is %s already", stateName(rec.Approval.GetState())))
	case rec.Nonce != r.Token.Nonce:
		return TokenRefused(tool, "it does not belong to this approval")
	case !sameAnswers(rec.Call.GetInput(), call.GetInput()):
		// The token binds the arguments; the answers of a round are bound
		// here: the call presented answers as the parked one did.
		return TokenRefused(tool, "it was given for a call with other answers")
	}
	f.approve(rec, call, r.ArgsHash, approvalBy{who: r.Caller.Agent, reason: "confirmed by the caller with its approval token",
		scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE, at: r.Now})
	if err := f.store.Update(ctx, rec); err != nil {
		if errors.Is(err, approvals.ErrConflict) {
			return TokenRefused(tool, "its approval was decided meanwhile")
		}
		f.log.WarnContext(ctx, "recording an approval failed", "approval_id", rec.ID(), "err", err)
		return envelope.Overloaded("the approval could not be recorded: "+err.Error(), time.Second)
	}
	f.tracker.Note(rec)
	f.finishNow(ctx, rec)
	return nil
}

// sameAnswers reports whether two input rounds are the same round: both
// none, or both continuing the same call with the same answers (the
// tool's state, which the dispatcher stores, is not the caller's to
// send).
func sameAnswers(a, b *toolwirev1.InputRound) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return a.GetPreviousCallId() == b.GetPreviousCallId() && maps.Equal(a.GetResponsesJson(), b.GetResponsesJson())
}
