package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval flow (doc.go, "Approvals"): an ask parks the call in the
// approvals bucket (park); an approver approves it (Approve), once or
// with a grant, or denies it (Deny); a caller holding a token approves it
// itself by sending the call again (redeem); nobody deciding in time
// expires it (the sweep, approvalsweep.go). Each decision is one
// compare-and-set of the record, so exactly one replica decides, and is
// then finished: the call published (approved) or its terminal answer
// (denied, expired), and the record marked published. A replica that
// stops between the two leaves the finishing to the sweep of any replica.

// Scopes of the approval flow.
const (
	// ApproveScope lets a caller list, approve and deny the parked calls
	// of its tenant, and list and revoke its grants.
	ApproveScope = "approve"
	// ConfirmScope lets a caller receive an approval token with
	// CONFIRMATION_REQUIRED, and present one (when the dispatchers hold
	// token keys).
	ConfirmScope = "confirm"
)

// Errors of the approval methods.
var (
	// ErrNeedApproveScope: the caller does not hold the "approve" scope.
	ErrNeedApproveScope = errors.New(`dispatch: approvals and grants need the "approve" scope`)
	// ErrUnknownApproval: no approval (or grant) with that id in the
	// caller's tenant.
	ErrUnknownApproval = errors.New("dispatch: unknown approval")
	// ErrApprovalDecided: the approval was decided already (or expired),
	// so it cannot be decided again.
	ErrApprovalDecided = errors.New("dispatch: approval already decided")
	// ErrBadApproval: the request is not valid (no reason for a denial, a
	// bad scope, glob, argument pattern or ttl).
	ErrBadApproval = errors.New("dispatch: invalid approval request")
)

// maxReasonBytes bounds an approver's reason.
const maxReasonBytes = 1024

// finishTimeout bounds finishing a decision (the nonce, the events, the
// publish with its retries, the record) once it is made: it is finished
// also when the approver's request ends first.
const finishTimeout = publishRetryFor + 15*time.Second

// park parks a call the policy asks about: a PENDING record in the
// approvals bucket (never a pool subject), an AWAITING_APPROVAL event,
// and the CONFIRMATION_REQUIRED answer with the approval id (the call's
// id) and, for a caller with the confirm scope, a token. A record the
// bucket does not take refuses the call (fail closed): OVERLOADED,
// retryable, nothing parked or queued.
func (d *Dispatcher) park(ctx context.Context, adm *admission) (*Submitted, *waiter, error) {
	id, w, callID, call, now, a := adm.id, adm.w, adm.callID, adm.call, adm.now, adm.ask
	rec := &approvals.Record{
		Approval: &toolwirev1.Approval{Id: callID, State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Tool: call.Tool,
			SpecVersion: call.SpecVersion, Caller: call.Caller, ArgumentsJson: string(redact.ForSpec(a.spec).Arguments(call.Arguments)),
			ArgsSha256: a.args.Hash(), Decision: a.pd, CreatedAt: timestamppb.New(now),
			ExpiresAt: timestamppb.New(now.Add(d.cfg.ApprovalTTL))},
		Call: call, Nonce: approvals.NewNonce(),
		ScheduleToStart: timeout(call.ScheduleToStartDeadline, now), ScheduleToClose: timeout(call.Deadline, now),
	}
	if err := d.approvals.Park(ctx, rec); err != nil {
		d.log.WarnContext(ctx, "parking a call for approval failed; refusing it", "call_id", callID, "err", err)
		adm.refused(envelope.Overloaded("this call needs approval, and it could not be parked for an approver: "+err.Error(), 30*time.Second), a.pd)
		return d.refuseCall(ctx, adm), nil, nil
	}
	d.tracker.Note(rec)
	te := awaitingError(rec, a.reason)
	// The event (read by operators and Watch) never carries the token.
	d.approvalEvent(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, func(ev *toolwirev1.CallEvent) {
		ev.Policy, ev.Error = a.pd, te
	})
	if token := d.issueToken(ctx, id, rec); token != "" {
		te = proto.Clone(te).(*toolwirev1.ToolError)
		te.Approval.Token = token
		te.Suggestion += "; or, once your user confirmed it, send the same call again with approval_token"
	}
	return &Submitted{CallID: callID, Awaiting: awaitingResponse(callID, call, te, now)}, w, nil
}

// timeout is the time from now to a deadline; 0 without one.
func timeout(deadline *timestamppb.Timestamp, now time.Time) time.Duration {
	if deadline == nil {
		return 0
	}
	return max(deadline.AsTime().Sub(now), time.Millisecond)
}

// awaitingError is the CONFIRMATION_REQUIRED answer of a parked call,
// without token: the approval id, its expiry and why (the decision's
// reason, never a rule's text).
func awaitingError(rec *approvals.Record, reason string) *toolwirev1.ToolError {
	id := rec.ID()
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
		fmt.Sprintf("this call of %q needs approval: %s (approval %s)", rec.Approval.GetTool(), reason, id))
	te.Approval = &toolwirev1.ApprovalRequired{ApprovalId: id, ExpiresAt: rec.Approval.GetExpiresAt()}
	te.Suggestion = fmt.Sprintf("the call waits for an approver (scope %q): `toolctl approvals approve %s` runs it, "+
		"`toolctl approvals deny %s --reason ...` refuses it; its result is fetched by this id", ApproveScope, id, id)
	return te
}

// awaitingResponse is the answer envelope of a parked call (not
// terminal: the state says AWAITING_APPROVAL).
func awaitingResponse(callID string, call *toolwirev1.ToolCall, te *toolwirev1.ToolError, at time.Time) *toolwirev1.ToolResponse {
	return envelope.Error(callID, call.GetTool(), te, &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: timestamppb.New(at),
		SpecVersion: call.GetSpecVersion(), Session: call.GetCaller().GetSession()})
}

// issueToken returns a signed approval token for rec when the dispatchers
// hold token keys and the caller holds the confirm scope; "" otherwise.
func (d *Dispatcher) issueToken(ctx context.Context, id identity.Identity, rec *approvals.Record) string {
	if d.cfg.TokenKeys == nil || !registry.HasScopes(id.Scopes, []string{ConfirmScope}) {
		return ""
	}
	a := rec.Approval
	token, err := d.cfg.TokenKeys.Sign(&policy.Approval{ID: a.GetId(), Tenant: a.GetCaller().GetTenant(), Agent: a.GetCaller().GetAgent(),
		Session: a.GetCaller().GetSession(), Tool: a.GetTool(), SpecVersion: a.GetSpecVersion(), ArgsSHA256: a.GetArgsSha256(),
		Expires: a.GetExpiresAt().AsTime(), Nonce: rec.Nonce})
	if err != nil {
		d.log.ErrorContext(ctx, "signing an approval token failed; answering without one", "call_id", a.GetId(), "err", err)
		return ""
	}
	return token
}

// verifyToken checks an approval token presented with a call before the
// decision: the dispatchers hold keys, the caller may present tokens (the
// confirm scope), and the token's MAC is right (approvals.Keys.Verify).
// The binding it returns is then checked against the call by Decide.
func (d *Dispatcher) verifyToken(id identity.Identity, spec *toolwirev1.ToolSpec, token string) (*policy.Approval, *toolwirev1.ToolError) {
	switch {
	case d.cfg.TokenKeys == nil:
		return nil, tokenRefused(spec.Name, "this installation issues no approval tokens")
	case !registry.HasScopes(id.Scopes, []string{ConfirmScope}):
		return nil, tokenRefused(spec.Name, fmt.Sprintf("presenting one needs the %q scope", ConfirmScope))
	}
	a, err := d.cfg.TokenKeys.Verify(token)
	if err != nil {
		return nil, tokenRefused(spec.Name, "it is not a valid token (altered, forged, or signed with a key no longer in use)")
	}
	return a, nil
}

// tokenRefused is the answer to a call whose approval token does not let
// it run: CONFIRMATION_REQUIRED, nothing parked or queued.
func tokenRefused(tool, why string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED,
		fmt.Sprintf("the approval token presented with this call of %q was refused: %s", tool, why))
	te.Suggestion = "send the call without a token to ask for a new approval"
	return te
}

// redeem runs a call an approval token covers (Decide checked the token's
// binding against it): the token's approval is the parked call's, so the
// call takes that call's id, the record is approved by the caller's own
// confirmation (a compare-and-set: a token or approval used once), its
// nonce consumed, and the call published as the parked one. The call is
// the one presented (the same tool, version, caller and arguments, bound
// by the token), with its own fresh deadlines. A refusal is recorded
// under the id admission minted, never under the parked call's.
func (d *Dispatcher) redeem(ctx context.Context, adm *admission) (*Submitted, *waiter, error) {
	id, w, call, now, a := adm.id, adm.w, adm.call, adm.now, adm.ask
	refuse := func(te *toolwirev1.ToolError) (*Submitted, *waiter, error) {
		adm.refused(te, a.pd)
		adm.callID = a.minted
		return d.refuseCall(ctx, adm), nil, nil
	}
	rec, err := d.approvals.Get(ctx, id.Tenant, a.token.ID)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return refuse(tokenRefused(call.Tool, "its approval no longer exists"))
	case err != nil:
		d.log.WarnContext(ctx, "reading an approval failed", "approval_id", a.token.ID, "err", err)
		return refuse(envelope.Overloaded("the approval of this token could not be read: "+err.Error(), time.Second))
	case rec.Decided():
		return refuse(tokenRefused(call.Tool, fmt.Sprintf("its approval is %s already", stateName(rec.Approval.GetState()))))
	case rec.Nonce != a.token.Nonce:
		return refuse(tokenRefused(call.Tool, "it does not belong to this approval"))
	case roundDigest(rec.Call.GetInput()) != roundDigest(call.GetInput()):
		// The token binds the arguments; the answers of a round are bound
		// here: the call presented answers as the parked one did.
		return refuse(tokenRefused(call.Tool, "it was given for a call with other answers"))
	}
	approve(rec, call, a.args.Hash(), approvalBy{who: id.Agent, reason: "confirmed by the caller with its approval token",
		scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE}, now, d.cfg.ApprovalTTL)
	if err := d.approvals.Update(ctx, rec); err != nil {
		if errors.Is(err, approvals.ErrConflict) {
			return refuse(tokenRefused(call.Tool, "its approval was decided meanwhile"))
		}
		d.log.WarnContext(ctx, "recording an approval failed", "approval_id", rec.ID(), "err", err)
		return refuse(envelope.Overloaded("the approval could not be recorded: "+err.Error(), time.Second))
	}
	d.tracker.Note(rec)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := d.finishApproved(fctx, rec); err != nil {
		d.log.WarnContext(ctx, "publishing an approved call failed; the approval sweep publishes it", "call_id", rec.ID(), "err", err)
	}
	return &Submitted{CallID: rec.ID()}, w, nil
}

// approvalBy is who decided an approval, how and why.
type approvalBy struct {
	who, reason string
	scope       toolwirev1.ApprovalScope
	grantID     string
}

// approve turns the pending record rec into an approved one that runs
// call (the parked call, or the call presented with a token), whose
// arguments' SHA-256 is argsHash: the binding the worker re-checks, bound
// to the call's caller, tool, version and arguments, used once (the
// record's nonce), valid while the call may run (its schedule-to-close
// deadline, or ttl without one).
func approve(rec *approvals.Record, call *toolwirev1.ToolCall, argsHash string, by approvalBy, now time.Time, ttl time.Duration) {
	call.ApprovalId = rec.ID()
	expires := now.Add(ttl)
	if call.Deadline != nil {
		expires = call.Deadline.AsTime()
	}
	c := call.GetCaller()
	rec.Call = call
	rec.Binding = &policy.Approval{ID: rec.ID(), Tenant: c.GetTenant(), Agent: c.GetAgent(), Session: c.GetSession(), Tool: call.Tool,
		SpecVersion: call.SpecVersion, ArgsSHA256: argsHash, Expires: expires, Approver: by.who, Reason: by.reason, Nonce: rec.Nonce}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, by, now)
}

// decided records the decision on rec's approval.
func decided(rec *approvals.Record, state toolwirev1.ApprovalState, by approvalBy, now time.Time) {
	a := rec.Approval
	a.State, a.DecidedAt, a.Approver, a.Reason, a.Scope, a.GrantId = state, timestamppb.New(now), by.who, by.reason, by.scope, by.grantID
	rec.Published = false
}

// Approve approves the parked call req.Id of the caller's tenant (the
// caller needs the approve scope): once (scope unset or ONCE), or also
// with a grant that covers later calls of the call's session, agent or
// tenant (scope SESSION, AGENT, TENANT) that match its tool glob (default
// the call's tool) and argument patterns, for its ttl (default
// Config.GrantTTL). The call's deadlines are stamped afresh, the record
// approved (one compare-and-set: of racing approvers and replicas one
// wins, the others get ErrApprovalDecided), its nonce consumed, and the
// call published. It returns the approval and the grant stored (nil for
// once). Errors: ErrNeedApproveScope, ErrUnknownApproval,
// ErrApprovalDecided (also for an approval past its expiry), ErrBadApproval.
func (d *Dispatcher) Approve(ctx context.Context, id identity.Identity, req *toolwirev1.ApproveRequest) (*toolwirev1.Approval, *toolwirev1.Grant, error) {
	if err := checkApprover(id); err != nil {
		return nil, nil, err
	}
	if len(req.GetReason()) > maxReasonBytes {
		return nil, nil, fmt.Errorf("%w: the reason is longer than %d bytes", ErrBadApproval, maxReasonBytes)
	}
	rec, err := d.pendingRecord(ctx, id, req.GetId())
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if !now.Before(rec.Approval.GetExpiresAt().AsTime()) {
		return nil, nil, fmt.Errorf("%w: approval %s expired at %s", ErrApprovalDecided, rec.ID(),
			rec.Approval.GetExpiresAt().AsTime().UTC().Format(time.RFC3339))
	}
	scope := cmp.Or(req.GetScope(), toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	var g *approvals.Grant
	if scope == toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE {
		if len(req.GetArgsPattern()) > 0 || req.GetTool() != "" || req.GetTtl() != nil {
			return nil, nil, fmt.Errorf("%w: args_pattern, tool and ttl shape a grant: give a session, agent or tenant scope", ErrBadApproval)
		}
	} else {
		if g, err = d.grantFor(id, rec, req, scope, now); err != nil {
			return nil, nil, err
		}
		if err := d.approvals.PutGrant(ctx, g); err != nil {
			return nil, nil, fmt.Errorf("dispatch: store grant: %w", err)
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
	by := approvalBy{who: id.Agent, reason: strings.TrimSpace(req.GetReason()), scope: scope}
	if g != nil {
		by.grantID = g.ID
	}
	approve(rec, call, rec.Approval.GetArgsSha256(), by, now, d.cfg.ApprovalTTL)
	if err := d.approvals.Update(ctx, rec); err != nil {
		if g != nil {
			if _, rerr := d.approvals.RevokeGrant(context.WithoutCancel(ctx), g.Tenant, g.ID); rerr != nil {
				d.log.WarnContext(ctx, "removing the grant of a lost approval failed", "grant_id", g.ID, "err", rerr)
			}
		}
		return nil, nil, d.decideFailed(ctx, id, rec.ID(), err)
	}
	d.tracker.Note(rec)
	if g != nil {
		d.grants.Add(g)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := d.finishApproved(fctx, rec); err != nil {
		d.log.WarnContext(ctx, "publishing an approved call failed; the approval sweep publishes it", "call_id", rec.ID(), "err", err)
	}
	return rec.Approval, grantView(g), nil
}

// grantFor builds the grant an approval with a session, agent or tenant
// scope stores: whose calls it covers (the parked call's session and
// agent, its agent, or the whole tenant), the tool glob, the argument
// patterns and the expiry.
func (d *Dispatcher) grantFor(id identity.Identity, rec *approvals.Record, req *toolwirev1.ApproveRequest, scope toolwirev1.ApprovalScope, now time.Time) (*approvals.Grant, error) {
	caller := rec.Call.GetCaller()
	g := policy.Grant{ID: ulid.Make().String(), Tenant: id.Tenant, Tool: cmp.Or(req.GetTool(), rec.Approval.GetTool()),
		Args: maps.Clone(req.GetArgsPattern()), ApprovalID: rec.ID(), Approver: id.Agent}
	switch scope {
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
	ttl := d.cfg.GrantTTL
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
func (d *Dispatcher) Deny(ctx context.Context, id identity.Identity, approvalID, reason string) (*toolwirev1.Approval, error) {
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
	rec, err := d.pendingRecord(ctx, id, approvalID)
	if err != nil {
		return nil, err
	}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, approvalBy{who: id.Agent, reason: reason}, time.Now())
	if err := d.approvals.Update(ctx, rec); err != nil {
		return nil, d.decideFailed(ctx, id, rec.ID(), err)
	}
	d.tracker.Note(rec)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := d.finishDecided(fctx, rec); err != nil {
		d.log.WarnContext(ctx, "answering a denied call failed; the approval sweep answers it", "call_id", rec.ID(), "err", err)
	}
	return rec.Approval, nil
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
func (d *Dispatcher) pendingRecord(ctx context.Context, id identity.Identity, approvalID string) (*approvals.Record, error) {
	rec, err := d.approvals.Get(ctx, id.Tenant, approvalID)
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
func (d *Dispatcher) decideFailed(ctx context.Context, id identity.Identity, approvalID string, err error) error {
	if !errors.Is(err, approvals.ErrConflict) {
		return err
	}
	if rec, gerr := d.approvals.Get(ctx, id.Tenant, approvalID); gerr == nil && rec.Decided() {
		return fmt.Errorf("%w: approval %s is %s (by %s)", ErrApprovalDecided, approvalID, stateName(rec.Approval.GetState()),
			cmp.Or(rec.Approval.GetApprover(), "its expiry"))
	}
	return fmt.Errorf("%w: approval %s changed meanwhile", ErrApprovalDecided, approvalID)
}

// stateName is an approval state's short name (PENDING, APPROVED, ...).
func stateName(s toolwirev1.ApprovalState) string {
	return strings.TrimPrefix(s.String(), "APPROVAL_STATE_")
}

// finishApproved finishes an approved record, and is safe to repeat (the
// sweep does, for a replica that stopped half way): the nonce consumed
// for the call (a KV create; a nonce another call used refuses it), the
// APPROVED event (one per approval: its message id), the call published
// with its id as message id (a repeat within the calls stream's
// duplicate window is stored once), its ACCEPTED record, and the record
// marked published.
func (d *Dispatcher) finishApproved(ctx context.Context, rec *approvals.Record) error {
	if hook := d.beforeFinish.Load(); hook != nil {
		if err := (*hook)(); err != nil {
			return err
		}
	}
	tenant, callID := rec.Tenant(), rec.ID()
	if err := d.approvals.ConsumeNonce(ctx, tenant, rec.Binding.Nonce, callID, rec.Binding.Expires); err != nil {
		if !errors.Is(err, approvals.ErrNonceUsed) {
			return err
		}
		// One decision per record makes this impossible; were it to
		// happen, the call is answered rather than run twice.
		d.log.ErrorContext(ctx, "the nonce of an approved call was used by another call; refusing it", "call_id", callID, "err", err)
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, "its approval was used by another call")
		return d.answerRecord(ctx, rec, te)
	}
	d.approvalEvent(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED, nil)
	if err := d.publishCall(ctx, rec.Call); err != nil {
		return err
	}
	d.publishAcceptedAt(tenant, rec.Call, timestamppb.Now())
	return d.markPublished(ctx, rec)
}

// publishCall publishes an approved call on its calls subject through the
// path admission uses (awaitCall): message id the call id, the calls
// stream expected, republished while unanswered.
func (d *Dispatcher) publishCall(ctx context.Context, call *toolwirev1.ToolCall) error {
	data, err := proto.Marshal(call)
	if err != nil {
		return fmt.Errorf("dispatch: marshal call: %w", err)
	}
	subject := d.subj.Call(call.Executor, call.GetCaller().GetTenant(), call.Provider, call.Tool)
	ctx, pub := d.startPublish(ctx, subject, call)
	defer pub.end()
	hdr := pub.header
	if hdr == nil {
		hdr = make(nats.Header, 2)
	}
	hdr[jetstream.MsgIDHeader] = []string{call.CallId}
	hdr[jetstream.ExpectedStreamHeader] = d.expectCalls
	msg := &nats.Msg{Subject: subject, Data: data, Header: hdr}
	fut, err := d.bus.JS.PublishMsgAsync(msg)
	if err == nil {
		err = d.awaitCall(ctx, msg, fut)
	}
	if err != nil {
		pub.fail(err)
		return fmt.Errorf("dispatch: publish approved call: %w", err)
	}
	return nil
}

// markPublished records that rec's call (or its answer) is published. A
// record another replica changed meanwhile was marked by it.
func (d *Dispatcher) markPublished(ctx context.Context, rec *approvals.Record) error {
	rec.Published = true
	if err := d.approvals.Update(ctx, rec); err != nil && !errors.Is(err, approvals.ErrConflict) {
		return err
	}
	d.tracker.Note(rec)
	return nil
}

// finishDecided finishes a denied or expired record, and is safe to
// repeat: its event (one per decision: its message id) and the call's
// terminal answer (PERMISSION_DENIED with the approver's reason, or
// EXPIRED), then the record marked published.
func (d *Dispatcher) finishDecided(ctx context.Context, rec *approvals.Record) error {
	a := rec.Approval
	var te *toolwirev1.ToolError
	switch a.GetState() {
	case toolwirev1.ApprovalState_APPROVAL_STATE_DENIED:
		d.approvalEvent(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_DENIED, nil)
		if rec.CancelledBy != "" {
			te = envelope.Interrupted(fmt.Sprintf("cancelled by %s while it waited for approval; it never ran", rec.CancelledBy),
				toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE)
			break
		}
		te = envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
			fmt.Sprintf("an approver denied this call of %q: %s", a.GetTool(), a.GetReason()))
		te.Suggestion = "do not retry this call as it is"
	case toolwirev1.ApprovalState_APPROVAL_STATE_EXPIRED:
		d.approvalEvent(ctx, rec, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_EXPIRED, nil)
		te = envelope.Expired(fmt.Sprintf("no approver decided on this call of %q before %s; it never ran", a.GetTool(),
			a.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)))
		te.Suggestion = "call again to ask for a new approval"
	default:
		return fmt.Errorf("dispatch: approval %s is %s, not denied or expired", rec.ID(), stateName(a.GetState()))
	}
	return d.answerRecord(ctx, rec, te)
}

// answerRecord publishes te as the terminal answer of rec's call, with
// ExpectLastSequencePerSubject(0) as workers do (never over a result; a
// repeat finds its own), then marks the record published.
func (d *Dispatcher) answerRecord(ctx context.Context, rec *approvals.Record, te *toolwirev1.ToolError) error {
	call, now := rec.Call, timestamppb.Now()
	resp := envelope.Error(rec.ID(), call.GetTool(), te, &toolwirev1.ResponseMeta{Source: "dispatcher", SpecVersion: call.GetSpecVersion(),
		Session: call.GetCaller().GetSession(), AcceptedAt: call.GetAcceptedAt(), StartedAt: now, FinishedAt: now, Duration: durationpb.New(0)})
	data, err := proto.Marshal(resp)
	if err != nil {
		return fmt.Errorf("dispatch: marshal answer: %w", err)
	}
	subject := d.subj.Result(rec.Tenant(), call.GetDispatcher(), rec.ID())
	if _, err := d.bus.JS.Publish(ctx, subject, data, jetstream.WithExpectLastSequencePerSubject(0)); err != nil && !bus.IsWrongLastSequence(err) {
		return fmt.Errorf("dispatch: publish answer of %s: %w", rec.ID(), err)
	}
	return d.markPublished(ctx, rec)
}

// approvalEvent records an event of rec's approval: its message id is
// the call id and the event type, so a decision finished twice (a
// replica, then the sweep) is recorded once; fill adds to it.
func (d *Dispatcher) approvalEvent(ctx context.Context, rec *approvals.Record, t toolwirev1.CallEventType, fill func(*toolwirev1.CallEvent)) {
	ev := &toolwirev1.CallEvent{CallId: rec.ID(), Tool: rec.Approval.GetTool(), Type: t, Caller: rec.Call.GetCaller(),
		Approval: rec.Approval, Time: timestamppb.Now()}
	if fill != nil {
		fill(ev)
	}
	data, err := proto.Marshal(ev)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
		_, err = d.bus.JS.Publish(ctx, d.subj.Event(rec.Tenant(), d.cfg.Name, rec.ID()), data,
			jetstream.WithMsgID(rec.ID()+"-"+strings.ToLower(strings.TrimPrefix(t.String(), "CALL_EVENT_TYPE_"))))
		cancel()
	}
	if err != nil {
		d.log.WarnContext(ctx, "approval event not recorded", "call_id", rec.ID(), "type", t, "err", err)
	}
}

// grantView is the API's form of a stored grant; nil for nil.
func grantView(g *approvals.Grant) *toolwirev1.Grant {
	if g == nil {
		return nil
	}
	out := &toolwirev1.Grant{Id: g.ID, Layer: g.Layer.String(), Tenant: g.Tenant, Agent: g.Agent, Session: g.Session, Tool: g.Tool,
		Args: maps.Clone(g.Args), ApprovalId: g.ApprovalID, Approver: g.Approver, CreatedAt: timestamppb.New(g.CreatedAt)}
	if !g.Expires.IsZero() {
		out.ExpiresAt = timestamppb.New(g.Expires)
	}
	return out
}

// cancelParked ends a parked call its caller cancelled: the record is
// denied (the same compare-and-set as a decision; one that lost to an
// approver leaves the call to the worker, which finds the tombstone) and
// the call answered CANCELLED. Failures are logged: the tombstone alone
// keeps the call from running.
func (d *Dispatcher) cancelParked(ctx context.Context, id identity.Identity, callID, reason string) {
	rec, err := d.approvals.Get(ctx, id.Tenant, callID)
	if err != nil || rec.Decided() {
		return
	}
	why := "cancelled by its caller"
	if reason != "" {
		why += ": " + reason
	}
	decided(rec, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, approvalBy{who: id.Agent, reason: why}, time.Now())
	rec.CancelledBy = id.Agent
	if err := d.approvals.Update(ctx, rec); err != nil {
		if !errors.Is(err, approvals.ErrConflict) {
			d.log.WarnContext(ctx, "ending a cancelled parked call failed; its tombstone keeps it from running", "call_id", callID, "err", err)
		}
		return
	}
	d.tracker.Note(rec)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := d.finishDecided(fctx, rec); err != nil {
		d.log.WarnContext(ctx, "answering a cancelled parked call failed; the approval sweep answers it", "call_id", callID, "err", err)
	}
}
