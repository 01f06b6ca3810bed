package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// RefusedError is the worker's re-check refusing a call: it must not run
// (answer CONFIRMATION_REQUIRED, dead-letter it). Reason says why, never
// an argument's value.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "approvals: " + e.Reason }

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("approvals: call refused by the approval re-check")

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refused(format string, a ...any) error { return &RefusedError{Reason: fmt.Sprintf(format, a...)} }

// CheckCall is the worker's re-check before executing call, a call of the
// tool spec (the version the worker serves): a call can reach a pool
// without a dispatcher (a raw NATS publish), so what admission decided is
// checked again against the bucket, read by key through kv (the worker's
// permissions: direct gets only). It returns nil when the call may run;
// a *RefusedError when it must not; any other error when the bucket could
// not be read (try again later, never run on a guess).
//
//   - A call naming an approval (approval_id): the approval is the call's
//     own (its id is the call id), its record exists and is APPROVED, its
//     binding matches the call (caller, tool, spec version, arguments'
//     SHA-256) and has not expired (policy.Approval.CheckCall), and its
//     nonce was consumed by this call id (not another: used once).
//   - A call naming a grant (grant_id): the grant exists (not revoked,
//     not expired) and covers the call (policy.Grant.Covers).
//   - A call of a tool whose spec requires approval that names neither is
//     refused.
//
// A call naming neither, of a tool that does not require approval, costs
// nothing: there is nothing to check (a policy's ask rules are the
// dispatcher's). Whether the policy in force now denies a call that
// passes is the worker's next step (internal/worker, "The policy check").
func CheckCall(ctx context.Context, b *bus.Bus, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, now time.Time) error {
	tenant := call.GetCaller().GetTenant()
	switch {
	case call.GetApprovalId() != "":
		return checkApproval(ctx, leaderReader(b), call, tenant, now)
	case call.GetGrantId() != "":
		return checkGrant(ctx, leaderReader(b), spec, call, tenant, now)
	case spec.GetRequiresApproval():
		return refused("tool %q requires approval, and the call names no approval", spec.GetName())
	}
	return nil
}

func checkApproval(ctx context.Context, read reader, call *toolwirev1.ToolCall, tenant string, now time.Time) error {
	id := call.GetApprovalId()
	if !ValidID(id) || !bus.ValidTenant(tenant) {
		return refused("approval id %q is malformed", id)
	}
	if id != call.GetCallId() {
		return refused("approval %s approves another call, not %s", id, call.GetCallId())
	}
	r, err := getRecord(ctx, read, tenant, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return refused("approval %s has no record (never approved, or past its retention)", id)
	case errors.Is(err, ErrCorrupt):
		return refused("approval %s: its record cannot be read", id)
	case err != nil:
		return err
	}
	if st := r.Approval.GetState(); st != toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED || r.Binding == nil {
		return refused("approval %s is %s, not approved", id, stateName(st))
	}
	if err := r.Binding.CheckCall(call, now); err != nil {
		return refused("approval %s does not cover this call: %v", id, err)
	}
	user, err := nonceUser(ctx, read, tenant, r.Binding.Nonce)
	switch {
	case errors.Is(err, ErrNotFound):
		return refused("approval %s was never consumed", id)
	case err != nil:
		return err
	case user != call.GetCallId():
		return refused("approval %s was used by call %s", id, user)
	}
	return nil
}

func checkGrant(ctx context.Context, read reader, spec *toolwirev1.ToolSpec, call *toolwirev1.ToolCall, tenant string, now time.Time) error {
	id := call.GetGrantId()
	g, err := getGrant(ctx, read, tenant, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return refused("grant %q does not exist (revoked, expired or never made)", id)
	case errors.Is(err, ErrCorrupt):
		return refused("grant %s cannot be read", id)
	case err != nil:
		return err
	}
	args, err := policy.ParseArgs(call.GetArguments())
	if err != nil {
		return refused("grant %s does not cover this call: its arguments cannot be read canonically", id)
	}
	if g.Tenant != tenant || !g.Covers(spec, call.GetCaller(), args, now) {
		return refused("grant %s does not cover this call", id)
	}
	return nil
}
