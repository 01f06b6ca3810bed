package approvalflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxReasonBytes bounds an approver's reason.
const maxReasonBytes = 1024

// approvalBy is who decided an approval, how, why and when.
type approvalBy struct {
	who, reason string
	scope       toolwirev1.ApprovalScope
	grantID     string
	at          time.Time
}

// approve turns the pending record rec into an approved one that runs
// call (the parked call, or the call presented with a token), whose
// arguments' SHA-256 is argsHash: the binding the worker re-checks, bound
// to the call's caller, tool, version and arguments, used once (the
// record's nonce), valid while the call may run (its schedule-to-close
// deadline, or Config.TTL without one).
func (f *Flow) approve(rec *approvals.Record, call *toolwirev1.ToolCall, argsHash string, by approvalBy) {
	call.ApprovalId = rec.ID()
	expires := by.at.Add(f.cfg.TTL)
	if call.Deadline != nil {
		expires = call.Deadline.AsTime()
	}
	c := call.GetCaller()
	rec.Call = call
	rec.Binding = &policy.Approval{ID: rec.ID(), Tenant: c.GetTenant(), Agent: c.GetAgent(), Session: c.GetSession(), Tool: call.Tool,
		SpecVersion: call.SpecVersion, ArgsSHA256: argsHash, Expires: expires, Approver: by.who, Reason: by.reason, Nonce: rec.Nonce}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, by)
}

// decided records the decision on rec's approval.
func decided(rec *approvals.Record, state toolwirev1.ApprovalState, by approvalBy) {
	a := rec.Approval
	a.State, a.DecidedAt, a.Approver, a.Reason, a.Scope, a.GrantId = state, timestamppb.New(by.at), by.who, by.reason, by.scope, by.grantID
	rec.Published = false
}

// Approve approves the parked call req.Id of the caller's tenant (the
// caller needs the approve scope), unless the policy in force now denies
// it (ErrPolicyDenies: the call is denied and answered instead): once (scope unset or ONCE), or also
// with a grant that covers later calls of the call's session, agent or
// tenant (scope SESSION, AGENT, TENANT) that match its tool glob (default
// the call's tool) and argument patterns, for its ttl (default
// Config.GrantTTL). The call's deadlines are stamped afresh, the record
// approved (one compare-and-set: of racing approvers and replicas one
// wins, the others get ErrApprovalDecided), its nonce consumed, and the
// call published. It returns the approval and the grant stored (nil for
// once). Errors: ErrNeedApproveScope, ErrUnknownApproval,
// ErrApprovalDecided (also for an approval past its expiry), ErrBadApproval,
// ErrPolicyDenies.
func (f *Flow) Approve(ctx context.Context, id identity.Identity, req *toolwirev1.ApproveRequest) (*toolwirev1.Approval, *toolwirev1.Grant, error) {
	if err := checkApprover(id); err != nil {
		return nil, nil, err
	}
	if len(req.GetReason()) > maxReasonBytes {
		return nil, nil, fmt.Errorf("%w: the reason is longer than %d bytes", ErrBadApproval, maxReasonBytes)
	}
	rec, err := f.pendingRecord(ctx, id, req.GetId())
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if !now.Before(rec.Approval.GetExpiresAt().AsTime()) {
		return nil, nil, fmt.Errorf("%w: approval %s expired at %s", ErrApprovalDecided, rec.ID(),
			rec.Approval.GetExpiresAt().AsTime().UTC().Format(time.RFC3339))
	}
	ref, err := f.core.Denies(ctx, rec.Call)
	if err != nil {
		return nil, nil, fmt.Errorf("approvalflow: deciding approval %s again under the policy in force: %w", rec.ID(), err)
	}
	if ref != nil {
		// Deny wins, also over an approver, and so does the session's
		// end: the call is denied and answered, never run.
		if err := f.denyByPolicy(ctx, rec, ref); err != nil {
			return nil, nil, f.decideFailed(ctx, id, rec.ID(), err)
		}
		if ref.Type == toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE {
			return nil, nil, fmt.Errorf("%w: %s", ErrSessionInactive, ref.Why)
		}
		return nil, nil, fmt.Errorf("%w: %s", ErrPolicyDenies, ref.Why)
	}
	scope := cmp.Or(req.GetScope(), toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	var g *approvals.Grant
	if scope == toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE {
		if len(req.GetArgsPattern()) > 0 || req.GetTool() != "" || req.GetTtl() != nil {
			return nil, nil, fmt.Errorf("%w: args_pattern, tool and ttl shape a grant: give a session, agent or tenant scope", ErrBadApproval)
		}
	} else {
		if g, err = f.grantFor(id, rec, req, now); err != nil {
			return nil, nil, err
		}
		if err := f.store.PutGrant(ctx, g); err != nil {
			return nil, nil, fmt.Errorf("approvalflow: store grant: %w", err)
		}
	}
	call := proto.Clone(rec.Call).(*toolwirev1.ToolCall)
	// Waiting for a person does not count against the call's timeouts.
	if rec.ScheduleToStart > 0 {
		call.ScheduleToStartDeadline = timestamppb.New(now.Add(rec.ScheduleToStart))
	}
	if rec.ScheduleToClose > 0 {
		call.Deadline = timestamppb.New(now.Add(rec.ScheduleToClose))
	}
	by := approvalBy{who: id.Agent, reason: strings.TrimSpace(req.GetReason()), scope: scope, at: now}
	if g != nil {
		by.grantID = g.ID
	}
	f.approve(rec, call, rec.Approval.GetArgsSha256(), by)
	if err := f.store.Update(ctx, rec); err != nil {
		if g != nil {
			if _, rerr := f.store.RevokeGrant(context.WithoutCancel(ctx), g.Tenant, g.ID); rerr != nil {
				f.log.WarnContext(ctx, "removing the grant of a lost approval failed", "grant_id", g.ID, "err", rerr)
			}
		}
		return nil, nil, f.decideFailed(ctx, id, rec.ID(), err)
	}
	f.tracker.Note(rec)
	if g != nil {
		f.grants.Add(g)
	}
	f.finishNow(ctx, rec)
	return rec.Approval, grantView(g), nil
}

// grantFor builds the grant an approval with a session, agent or tenant
// scope (req.Scope) stores: whose calls it covers (the parked call's
// session and agent, its agent, or the whole tenant), the tool glob, the
// argument patterns and the expiry.
func (f *Flow) grantFor(id identity.Identity, rec *approvals.Record, req *toolwirev1.ApproveRequest, now time.Time) (*approvals.Grant, error) {
	caller := rec.Call.GetCaller()
	g := policy.Grant{ID: ulid.Make().String(), Tenant: id.Tenant, Tool: cmp.Or(req.GetTool(), rec.Approval.GetTool()),
		Args: maps.Clone(req.GetArgsPattern()), ApprovalID: rec.ID(), Approver: id.Agent}
	switch scope := req.GetScope(); scope {
	case toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION:
		if caller.GetSession() == "" {
			return nil, fmt.Errorf("%w: the call names no session, so there is no session to grant", ErrBadApproval)
		}
		g.Layer, g.Agent, g.Session = policy.LayerSession, caller.GetAgent(), caller.GetSession()
	case toolwirev1.ApprovalScope_APPROVAL_SCOPE_AGENT:
		g.Layer, g.Agent = policy.LayerAgent, caller.GetAgent()
	case toolwirev1.ApprovalScope_APPROVAL_SCOPE_TENANT:
		g.Layer = policy.LayerTenant
	default:
		return nil, fmt.Errorf("%w: unknown scope %s", ErrBadApproval, scope)
	}
	ttl := f.cfg.GrantTTL
	if req.GetTtl() != nil {
		if ttl = req.GetTtl().AsDuration(); ttl < time.Second {
			return nil, fmt.Errorf("%w: a grant's ttl must be at least 1s", ErrBadApproval)
		}
	}
	g.Expires = now.Add(ttl)
	if len(g.Args) > 64 {
		return nil, fmt.Errorf("%w: at most 64 argument patterns", ErrBadApproval)
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadApproval, err)
	}
	return &approvals.Grant{Grant: g, CreatedAt: now}, nil
}

// Deny denies the parked call approvalID of the caller's tenant (approve
// scope) with a reason, which its caller is told: the record is denied
// (one compare-and-set), an APPROVAL_DENIED event recorded, and the call
// answered PERMISSION_DENIED (not retryable, nothing ran) on its results
// subject, where waiters, GetResult, Watch and the audit find it. Errors:
// ErrNeedApproveScope, ErrBadApproval (no reason), ErrUnknownApproval,
// ErrApprovalDecided.
func (f *Flow) Deny(ctx context.Context, id identity.Identity, approvalID, reason string) (*toolwirev1.Approval, error) {
	if err := checkApprover(id); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return nil, fmt.Errorf("%w: a denial needs a reason: the caller is told it", ErrBadApproval)
	case len(reason) > maxReasonBytes:
		return nil, fmt.Errorf("%w: the reason is longer than %d bytes", ErrBadApproval, maxReasonBytes)
	}
	rec, err := f.pendingRecord(ctx, id, approvalID)
	if err != nil {
		return nil, err
	}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, approvalBy{who: id.Agent, reason: reason, at: time.Now()})
	if err := f.store.Update(ctx, rec); err != nil {
		return nil, f.decideFailed(ctx, id, rec.ID(), err)
	}
	f.tracker.Note(rec)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.FinishTimeout)
	defer cancel()
	if err := f.finishDecided(fctx, rec); err != nil {
		f.log.WarnContext(ctx, "answering a denied call failed; the approval sweep answers it", "call_id", rec.ID(), "err", err)
	}
	return rec.Approval, nil
}

// denyByPolicy denies the pending record rec because the policy in force
// denies its call, or its session ended (ref), and answers the call with
// ref's type saying so (PERMISSION_DENIED, MODE_RESTRICTED or
// SESSION_INACTIVE). The compare-and-set is a decision's: an error says
// another decision won (approvals.ErrConflict) or the store failed; a
// failed answer is logged and left to the sweep.
func (f *Flow) denyByPolicy(ctx context.Context, rec *approvals.Record, ref *Refusal) error {
	why := ref.Why
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, approvalBy{reason: why, at: time.Now()})
	rec.PolicyDenied = why
	if ref.Type != toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED && ref.Type != toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED {
		rec.DeniedAs = strings.TrimPrefix(ref.Type.String(), "ERROR_TYPE_")
	}
	if err := f.store.Update(ctx, rec); err != nil {
		return err
	}
	f.tracker.Note(rec)
	f.log.InfoContext(ctx, "a parked call is denied: the policy in force denies it now", "call_id", rec.ID(), "tenant", rec.Tenant(), "why", why)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.FinishTimeout)
	defer cancel()
	if err := f.finishDecided(fctx, rec); err != nil {
		f.log.WarnContext(ctx, "answering a call the policy denies failed; the approval sweep answers it", "call_id", rec.ID(), "err", err)
	}
	return nil
}

// CancelParked ends a parked call its caller (id) cancelled: the record
// is denied (the same compare-and-set as a decision; one that lost to an
// approver leaves the call to the worker, which finds the tombstone) and
// the call answered CANCELLED. Failures are logged: the tombstone alone
// keeps the call from running.
func (f *Flow) CancelParked(ctx context.Context, id identity.Identity, callID, reason string) {
	rec, err := f.store.Get(ctx, id.Tenant, callID)
	if err != nil || rec.Decided() {
		return
	}
	why := "cancelled by its caller"
	if reason != "" {
		why += ": " + reason
	}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, approvalBy{who: id.Agent, reason: why, at: time.Now()})
	rec.CancelledBy = id.Agent
	if err := f.store.Update(ctx, rec); err != nil {
		if !errors.Is(err, approvals.ErrConflict) {
			f.log.WarnContext(ctx, "ending a cancelled parked call failed; its tombstone keeps it from running", "call_id", callID, "err", err)
		}
		return
	}
	f.tracker.Note(rec)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.FinishTimeout)
	defer cancel()
	if err := f.finishDecided(fctx, rec); err != nil {
		f.log.WarnContext(ctx, "answering a cancelled parked call failed; the approval sweep answers it", "call_id", callID, "err", err)
	}
}

// checkApprover refuses a caller without the approve scope.
func checkApprover(id identity.Identity) error {
	if err := identity.CheckTenant(id); err != nil {
		return err
	}
	if !registry.HasScopes(id.Scopes, []string{ApproveScope}) {
		return ErrNeedApproveScope
	}
	return nil
}

// pendingRecord reads approval approvalID of the caller's tenant, which
// must still be pending.
func (f *Flow) pendingRecord(ctx context.Context, id identity.Identity, approvalID string) (*approvals.Record, error) {
	rec, err := f.store.Get(ctx, id.Tenant, approvalID)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return nil, fmt.Errorf("%w %q", ErrUnknownApproval, approvalID)
	case err != nil:
		return nil, err
	case rec.Decided():
		return nil, fmt.Errorf("%w: approval %s is %s", ErrApprovalDecided, approvalID, stateName(rec.Approval.GetState()))
	}
	return rec, nil
}

// decideFailed says why a decision's compare-and-set failed: another
// decision won (ErrApprovalDecided, naming it), or the store failed.
func (f *Flow) decideFailed(ctx context.Context, id identity.Identity, approvalID string, err error) error {
	if !errors.Is(err, approvals.ErrConflict) {
		return err
	}
	if rec, gerr := f.store.Get(ctx, id.Tenant, approvalID); gerr == nil && rec.Decided() {
		return fmt.Errorf("%w: approval %s is %s (by %s)", ErrApprovalDecided, approvalID, stateName(rec.Approval.GetState()),
			cmp.Or(rec.Approval.GetApprover(), "its expiry"))
	}
	return fmt.Errorf("%w: approval %s changed meanwhile", ErrApprovalDecided, approvalID)
}

// stateName is an approval state's short name (PENDING, APPROVED, ...).
func stateName(s toolwirev1.ApprovalState) string {
	return strings.TrimPrefix(s.String(), "APPROVAL_STATE_")
}
