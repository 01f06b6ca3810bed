package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetResult returns the result of callID for the caller's tenant, waiting
// up to wait for a pending call; a call the caller may not see
// (Config.AgentVisibility) is UNKNOWN, as a made-up id is. Any replica answers for any call. A wait
// counts against Config.MaxWaitingPerCaller (ErrTooManyWaiting).
func (d *Dispatcher) GetResult(ctx context.Context, id identity.Identity, callID string, wait time.Duration) (*toolwirev1.GetResultResponse, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if wait > 0 {
		if err := d.caps.acquire(capWaiting, id, d.cfg.MaxWaitingPerCaller); err != nil {
			return nil, err
		}
		defer d.caps.release(capWaiting, id)
	}
	if ok, err := d.reaches(ctx, id, callID); err != nil || !ok {
		return stateOnly(callID, toolwirev1.CallState_CALL_STATE_UNKNOWN), err
	}
	return d.getResult(ctx, resultQuery{id: id, callID: callID, wait: wait})
}

// resultQuery is one look for a call's result: the caller, the call, how
// long to wait for it, and whether the call surely exists (an idempotency
// hit whose original may still be publishing), so that no record yet means
// pending, not unknown.
type resultQuery struct {
	id     identity.Identity
	callID string
	wait   time.Duration
	known  bool
	tool   string // the call's (callTool), set by getResult
}

// getResult answers q: the stored result (findResult: the archive's
// too), else what the call's last event
// says (byLastEvent), waiting up to q.wait for a result when the call is
// not finished.
func (d *Dispatcher) getResult(ctx context.Context, q resultQuery) (*toolwirev1.GetResultResponse, error) {
	if _, err := ulid.ParseStrict(q.callID); err != nil {
		return stateOnly(q.callID, toolwirev1.CallState_CALL_STATE_UNKNOWN), nil
	}
	subject := d.subj.ResultAnyDispatcher(q.id.Tenant, q.callID)
	tool, err := d.callTool(ctx, q.id.Tenant, q.callID)
	if err != nil {
		return nil, err
	}
	q.tool = tool
	var ch chan *nats.Msg
	if q.wait > 0 {
		// Subscribe first, then look: a result published in between is
		// not missed.
		ch = make(chan *nats.Msg, 1)
		sub, err := d.bus.NC.ChanSubscribe(subject, ch)
		if err != nil {
			return nil, fmt.Errorf("dispatch: subscribe result: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := flush(ctx, d.bus.NC); err != nil {
			return nil, fmt.Errorf("dispatch: flush: %w", err)
		}
	}
	resp, err := d.findResult(ctx, subject, q.tool)
	if err != nil || resp != nil {
		return finished(q.callID, resp), err
	}
	r, err := d.byLastEvent(ctx, q, q.known || (q.wait > 0 && q.tool != ""))
	if err != nil || q.wait <= 0 || r.State == toolwirev1.CallState_CALL_STATE_DONE || r.State == toolwirev1.CallState_CALL_STATE_UNKNOWN {
		return r, err
	}
	return d.waitResult(ctx, q, subject, ch)
}

// waitResult waits up to q.wait (at most Config.MaxWait) for the result of
// a call that has none yet, on ch (the core subscription on subject); when
// the wait ends without one, the last event decides again.
func (d *Dispatcher) waitResult(ctx context.Context, q resultQuery, subject string, ch <-chan *nats.Msg) (*toolwirev1.GetResultResponse, error) {
	timer := time.NewTimer(min(q.wait, d.cfg.MaxWait))
	defer timer.Stop()
	// A result reaches core subscribers before the stream stores it, so
	// one published just before the subscription can be in neither place
	// at the first look: look again now and then while waiting.
	recheck := time.NewTicker(250 * time.Millisecond)
	defer recheck.Stop()
	for {
		var resp *toolwirev1.ToolResponse
		var err error
		select {
		case m := <-ch:
			// Only a hint: a result reaches core subscribers also when the
			// stream refuses it or never answers, and only a stored result
			// is the call's. Not stored yet: the next look finds it.
			resp, err = d.confirmResult(ctx, m.Subject, q.tool)
		case <-recheck.C:
			resp, err = d.loadResult(ctx, subject, q.tool)
		case <-timer.C:
			if resp, err := d.loadResult(ctx, subject, q.tool); err == nil && resp != nil {
				return finished(q.callID, resp), nil
			}
			// The last event decides again (a call admitted is pending;
			// one nobody admitted is unknown).
			r, err := d.byLastEvent(ctx, q, false)
			if err != nil {
				return stateOnly(q.callID, toolwirev1.CallState_CALL_STATE_PENDING), nil
			}
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err == nil && resp != nil {
			return finished(q.callID, resp), nil
		}
	}
}

// byLastEvent answers a call that has no stored result. The last event
// decides: REJECTED is its terminal answer; AWAITING_APPROVAL a call
// parked for an approver; any other (APPROVED included) a call on its
// way. A call with no event at all is on its way when known (it surely
// exists: an idempotency hit, or a stored call about to be waited for);
// otherwise it may be parked still (its AWAITING_APPROVAL event was lost,
// its approval record is not), on its way (a decided approval record, or
// its call is stored or was admitted here: a call waited on in Call has
// its admission record written only after AcceptedRecordDelay), or
// unknown (admitted).
func (d *Dispatcher) byLastEvent(ctx context.Context, q resultQuery, known bool) (*toolwirev1.GetResultResponse, error) {
	id, callID := q.id, q.callID
	ev, err := d.lastEvent(ctx, id.Tenant, callID, q.tool)
	switch {
	case err != nil:
		return nil, fmt.Errorf("dispatch: look up call: %w", err)
	case ev == nil:
		if known {
			return stateOnly(callID, toolwirev1.CallState_CALL_STATE_PENDING), nil
		}
		awaiting, parked := d.parkedAnswer(ctx, id, callID)
		switch {
		case awaiting != nil:
			return awaitingAnswer(callID, awaiting), nil
		case parked || q.tool != "":
			return stateOnly(callID, toolwirev1.CallState_CALL_STATE_PENDING), nil
		}
		return stateOnly(callID, toolwirev1.CallState_CALL_STATE_UNKNOWN), nil
	}
	switch ev.Type {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED:
		return finished(callID, envelope.Rejection(callID, ev.Tool, ev.Error, ev.Time.AsTime())), nil
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL:
		return awaitingAnswer(callID, awaitingEventAnswer(callID, ev)), nil
	}
	return stateOnly(callID, toolwirev1.CallState_CALL_STATE_PENDING), nil
}

// finished, awaitingAnswer and stateOnly are the three shapes of a
// GetResultResponse.
func finished(callID string, resp *toolwirev1.ToolResponse) *toolwirev1.GetResultResponse {
	return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: resp}
}

func awaitingAnswer(callID string, resp *toolwirev1.ToolResponse) *toolwirev1.GetResultResponse {
	return &toolwirev1.GetResultResponse{CallId: callID, State: toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, Response: resp}
}

func stateOnly(callID string, state toolwirev1.CallState) *toolwirev1.GetResultResponse {
	return &toolwirev1.GetResultResponse{CallId: callID, State: state}
}

// awaitingEventAnswer is the answer to a call whose last event is
// AWAITING_APPROVAL: the CONFIRMATION_REQUIRED error it recorded (never
// with the token, which no record keeps).
func awaitingEventAnswer(callID string, ev *toolwirev1.CallEvent) *toolwirev1.ToolResponse {
	te := ev.GetError()
	if te == nil {
		te = envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, "this call waits for an approval")
		te.Approval = &toolwirev1.ApprovalRequired{ApprovalId: callID, ExpiresAt: ev.GetApproval().GetExpiresAt()}
	}
	call := &toolwirev1.ToolCall{Tool: ev.GetTool(), SpecVersion: ev.GetApproval().GetSpecVersion(), Caller: ev.GetCaller()}
	return approvalflow.AwaitingResponse(callID, call, te, ev.GetTime().AsTime())
}

// parkedAnswer looks up the approval record of a call without events (its
// AWAITING_APPROVAL event may have been lost): the answer of a call still
// parked (nil for a decided one), and whether a record exists at all.
func (d *Dispatcher) parkedAnswer(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.ToolResponse, bool) {
	rec, err := d.approvals.Record(ctx, id.Tenant, callID)
	if err != nil {
		return nil, false
	}
	if rec.Decided() {
		return nil, true
	}
	te := approvalflow.AwaitingError(rec, rec.Approval.GetDecision().GetReason())
	return approvalflow.AwaitingResponse(callID, rec.Call, te, rec.Approval.GetCreatedAt().AsTime()), true
}

// confirmResult returns the believed result stored on subject, the
// literal subject of a result seen on a core subscription, of a call of
// tool, or nil when none is stored.
func (d *Dispatcher) confirmResult(ctx context.Context, subject, tool string) (*toolwirev1.ToolResponse, error) {
	resp, err := d.loadResult(ctx, subject, tool)
	if err != nil {
		return nil, fmt.Errorf("dispatch: confirm result: %w", err)
	}
	return resp, nil
}

// loadResult returns the believed result stored on subject (a call's
// result subject or ResultAnyDispatcher) of a call of tool (callTool),
// or nil when none is (internal/believed). It reads the stream's leader:
// a replica that lags would say "none" for a result the leader
// acknowledged.
func (d *Dispatcher) loadResult(ctx context.Context, subject, tool string) (*toolwirev1.ToolResponse, error) {
	return d.believedResp(d.answers().Read(ctx, subject, tool))
}

// believedResp is a read's believed result, with its latency budget's
// overrun in its meta (withBudget); nil when there is none.
func (d *Dispatcher) believedResp(s *believed.Stored, err error) (*toolwirev1.ToolResponse, error) {
	if err != nil {
		return nil, fmt.Errorf("dispatch: load result: %w", err)
	}
	d.withBudget(s)
	return s.GetResp(), nil
}

// admitted reports whether call callID of tenant, which has neither a
// result nor an event, is one a dispatcher admitted: its call is stored or
// this replica admitted it (tool, as callTool found it), or it is parked
// for an approver (its approval record). Anything else — a made-up id,
// another tenant's call, a call whose records are gone — is unknown, and
// answers the same on every RPC: no answer tells another tenant's call
// from an id nobody minted. A call whose publish was unconfirmed (a
// partition) is unknown to the other replicas until its publish lands;
// the replica that admitted it knows it.
func (d *Dispatcher) admitted(ctx context.Context, tenant, callID, tool string) bool {
	if tool != "" {
		return true
	}
	_, err := d.approvals.Record(ctx, tenant, callID)
	return err == nil
}
