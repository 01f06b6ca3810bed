package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval flow runs in internal/approvalflow (its doc.go, "The
// approval flow"): d.approvals parks, decides, redeems and sweeps. What
// stays here are the two admission steps that end in it (park, redeem:
// they hold the caller's waiter and idempotency key) and the paths the
// flow queues and answers calls by (approvalCore).

// Approvals is the replica's approval flow: the approve-scope operations
// (approve, deny, list, get, grants) for the API's faces.
func (d *Dispatcher) Approvals() *approvalflow.Flow { return d.approvals }

// park parks an asked call (approvalflow.Flow.Park) and answers it
// AWAITING_APPROVAL; a call that could not be parked is refused
// (OVERLOADED), its waiter and idempotency key given back.
func (a *admission) park(ctx context.Context) (*Submitted, *waiter, error) {
	d := a.d
	te, refusal := d.approvals.Park(ctx, &approvalflow.Ask{Caller: a.id, Call: a.call, Spec: a.ask.spec, ArgsHash: a.ask.args.Hash(),
		Decision: a.ask.pd, Reason: a.ask.reason, Now: a.now})
	if refusal != nil {
		a.refused(refusal, a.ask.pd)
		return a.refuseCall(ctx), nil, nil
	}
	return &Submitted{CallID: a.callID, Awaiting: approvalflow.AwaitingResponse(a.callID, a.call, te, a.now)}, a.w, nil
}

// redeem runs a call an approval token covers (approvalflow.Flow.Redeem):
// the call took the parked call's id and is published as it. A refusal
// is recorded under the id admission minted, never under the parked
// call's, its waiter and idempotency key given back.
func (a *admission) redeem(ctx context.Context) (*Submitted, *waiter, error) {
	d := a.d
	refusal := d.approvals.Redeem(ctx, &approvalflow.Redemption{Caller: a.id, Token: a.ask.token, Call: a.call, ArgsHash: a.ask.args.Hash(),
		Now: a.now})
	if refusal != nil {
		a.refused(refusal, a.ask.pd)
		a.callID = a.ask.minted
		return a.refuseCall(ctx), nil, nil
	}
	return &Submitted{CallID: a.ask.token.ID}, a.w, nil
}

// approvalCore is the dispatcher as the approval flow's core
// (approvalflow.Core): admission's publish path, the events stream and
// the results stream.
type approvalCore struct{ d *Dispatcher }

var _ approvalflow.Core = approvalCore{}

// PublishCall publishes an approved call on its calls subject through the
// path admission uses (awaitCall): message id the call id, the calls
// stream expected, republished while unanswered; then its ACCEPTED
// record, timed now.
func (c approvalCore) PublishCall(ctx context.Context, call *toolwirev1.ToolCall) error {
	d := c.d
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
		_, err = d.awaitCall(ctx, msg, fut) // its record is published after it
	}
	if err != nil {
		pub.fail(err)
		return fmt.Errorf("dispatch: publish approved call: %w", err)
	}
	d.publishAcceptedAt(call.GetCaller().GetTenant(), call, timestamppb.Now())
	return nil
}

// RecordEvent records ev on this replica's events subject of the call
// with message id msgID, waiting at most eventTimeout.
func (c approvalCore) RecordEvent(ctx context.Context, tenant, msgID string, ev *toolwirev1.CallEvent) error {
	data, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
	defer cancel()
	_, err = c.d.bus.JS.PublishMsg(ctx, c.d.signedEvent(c.d.subj.Event(tenant, c.d.cfg.Name, ev.GetCallId()), ev, data), jetstream.WithMsgID(msgID))
	return err
}

// Answer publishes resp as the terminal result of call on the results
// subject of the replica that admitted it, with
// ExpectLastSequencePerSubject as workers do (never over a believed
// result; a repeat finds its own: internal/believed).
func (c approvalCore) Answer(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) error {
	data, err := proto.Marshal(resp)
	if err != nil {
		return fmt.Errorf("dispatch: marshal answer: %w", err)
	}
	subject := c.d.subj.Result(call.GetCaller().GetTenant(), call.GetDispatcher(), resp.GetCallId())
	msg := c.d.bus.Signer.SignedMsg(subject, signing.KindResult, resp.GetCallId(), resp.GetMeta().GetAttempt(), data, nil)
	if _, err := c.d.answers().Publish(ctx, msg, call.GetTool()); err != nil && !bus.IsWrongLastSequence(err) {
		return fmt.Errorf("dispatch: publish answer of %s: %w", resp.GetCallId(), err)
	}
	return nil
}

// Denies decides call, a parked call, again as admission would now: a
// call whose session ended is refused SESSION_INACTIVE (the session's
// state read from the bucket, not the view's cache: an approval is rare,
// and a session ended a moment before it must not be missed), and the policy in force for its
// tenant decides it in the session's mode now (the mode may have changed
// while it waited; a session without a mode, or a call without a session,
// is in the policy's sessions.default_mode): a deny of the mode is MODE_RESTRICTED, another deny
// PERMISSION_DENIED, and a mode the policy no longer declares
// MODE_RESTRICTED (fail closed); the spec's definition for the call's
// model family and the mode now refuses it too (definitionRefusal), all
// without an approval: none turns a
// deny into an allow. The stand-in policy a replica holds while it cannot
// load the tenant's document (policystore.IsStandIn, rule
// policy-unavailable) is no deny, nor are its modes (it declares none): a
// read that failed must not end parked calls. A tool gone from the registry,
// or arguments that no longer parse, are no deny either: the worker
// refuses such a call. A registry or a session that does not answer is an
// error: nothing is approved until it is decided.
func (c approvalCore) Denies(ctx context.Context, call *toolwirev1.ToolCall) (*approvalflow.Refusal, error) {
	d := c.d
	caller := call.GetCaller()
	p := d.policyFor(caller.GetTenant())
	mode := p.Sessions().DefaultMode // a call without a session: in the default mode now
	if session := caller.GetSession(); session != "" {
		st, err := d.sessions.Refresh(ctx, caller.GetTenant(), session)
		if err != nil {
			return nil, fmt.Errorf("dispatch: the parked call's session: %w", err)
		}
		if st.Ended {
			return &approvalflow.Refusal{Type: toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, Why: sessionEnded(session, st.EndReason)}, nil
		}
		mode = p.Sessions().ModeOf(st.Mode)
	}
	if policystore.IsStandIn(p) {
		// The tenant's document could not be loaded: its modes and
		// default mode are unknown, and a read that failed must not end
		// parked calls (the stand-in's own deny is none either, below).
		return nil, nil
	}
	if mode != caller.GetMode() {
		caller = proto.CloneOf(caller)
		caller.Mode = mode
	}
	if mode := caller.GetMode(); p != nil && mode != "" && !p.HasMode(mode) {
		return &approvalflow.Refusal{Type: toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, Why: undeclaredMode(mode).GetMessage()}, nil
	}
	ent, err := d.reg.GetVersion(ctx, call.GetTool(), call.GetSpecVersion())
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: look up tool %q: %w", call.GetTool(), err)
	}
	if ref := definitionRefusal(ent.Spec, caller, call.GetArguments()); ref != nil {
		return ref, nil // definitions need no policy
	}
	if p == nil {
		return nil, nil
	}
	args, err := policy.ParseArgs(call.GetArguments())
	if err != nil {
		return nil, nil
	}
	dec := p.Decide(policy.Input{Tool: ent.Spec, Args: args, Caller: caller, Now: time.Now(), Grants: d.grantSource()})
	rule := dec.RuleID()
	if dec.Outcome != policy.Deny || rule == policystore.UnavailableRule {
		return nil, nil
	}
	if mode, mrule, ok := dec.ModeRestricted(); ok {
		return &approvalflow.Refusal{Type: toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED,
			Why: modeRestricted(call.GetTool(), mode, mrule, &dec).GetMessage()}, nil
	}
	if rule == "" {
		rule = "the default"
	}
	return &approvalflow.Refusal{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED,
		Why: fmt.Sprintf("%s (policy version %s, rule %s)", dec.Reason(), dec.Version, rule)}, nil
}

// definitionRefusal is the refusal of a parked or dead-lettered call by
// the spec's definition for its model family and the session's mode now
// (caller.mode; docs/toolsets.md, "Definitions in the spec"), as the
// definition and variant steps decide at admission: a definition that
// hides the tool, or whose input schema the arguments do not satisfy. The
// spec version and the family do not change while a call waits, so only a
// mode that changed can refuse here: MODE_RESTRICTED, or PERMISSION_DENIED
// for a call in no mode. Nil when the call may run as far as the
// definitions go.
func definitionRefusal(spec *toolwirev1.ToolSpec, caller *toolwirev1.Caller, args []byte) *approvalflow.Refusal {
	family, mode := caller.GetModelFamily(), caller.GetMode()
	def, i := registry.Definition(spec, family, mode)
	why := ""
	switch {
	case def.GetHidden():
		why = registry.DefinitionRefusal(spec.GetName(), family, mode, i)
	case def.GetInputSchemaJson() != "":
		sch, err := registry.DefaultSchemas.Compile(def.GetInputSchemaJson())
		if err != nil {
			why = fmt.Sprintf("tool %s's definitions[%d] has a schema that does not compile", spec.GetName(), i)
		} else if vs := registry.ValidateArgs(sch, args); len(vs) > 0 {
			// The field only: a violation's message may quote a value.
			why = fmt.Sprintf("the arguments do not satisfy the input schema of tool %s's definitions[%d] (at %q)",
				spec.GetName(), i, cmp.Or(vs[0].GetField(), "/"))
		}
	}
	if why == "" {
		return nil
	}
	t := toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED
	if mode == "" {
		t = toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED
	}
	return &approvalflow.Refusal{Type: t, Why: why}
}

// PolicyVersion is the version of the policy in force for tenant, "" for
// none.
func (c approvalCore) PolicyVersion(tenant string) string {
	return c.d.policyFor(tenant).Version()
}
