package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Call admits a call and waits up to wait (0 = the default) for its
// terminal response. When the wait ends first the state is PENDING. When
// ctx ends first, the error is ctx's and, for an admitted call, the
// response still names it (state PENDING), so that the caller can cancel
// it or fetch its result.
func (d *Dispatcher) Call(ctx context.Context, id identity.Identity, o *toolwirev1.CallRequest, wait time.Duration) (*toolwirev1.CallResponse, error) {
	if !o.ApplyIntents {
		return d.call(ctx, id, o, wait)
	}
	if o.Session == "" {
		return nil, ErrNoSession
	}
	resp, err := d.call(ctx, id, o, wait)
	if err != nil || resp.State != toolwirev1.CallState_CALL_STATE_DONE {
		return resp, err
	}
	// The call's own session: an idempotent repeat answered with an earlier
	// call's response applies to that call's session, never to another.
	session := cmp.Or(resp.Response.GetMeta().GetSession(), o.Session)
	out, err := d.applyResult(ctx, id.Tenant, session, &toolwirev1.GetResultResponse{CallId: resp.CallId, Response: resp.Response})
	if err != nil {
		// The tool ran and its response is stored: answer it, say why the
		// intents are not applied (ApplyIntents can do it later).
		d.log.WarnContext(ctx, "applying intents failed", "call_id", resp.CallId, "err", err)
		resp.ApplyError = err.Error()
		return resp, nil
	}
	resp.Session = out.Session
	resp.RefusedIntents = refusedEntries(resp.CallId, out.Refused)
	return resp, nil
}

// applyResult applies the intents of r, a finished call's stored result,
// to the tenant's session, each checked where it is applied: against the
// intent catalog and the spec version of the tool the result records
// (ToolResponse.tool, ResponseMeta.spec_version), read from the registry
// (intents.Screen). The valid ones apply; the others are refused, each
// with its reason in the session's log, logged at WARN and counted
// (toolwire_dispatcher_intents_refused_total) when first recorded. A
// result that names no spec version, or one the registry does not hold,
// has every intent refused; a registry that cannot be read is an error.
func (d *Dispatcher) applyResult(ctx context.Context, tenant, session string, r *toolwirev1.GetResultResponse) (intents.Outcome, error) {
	resp := r.GetResponse()
	in := intents.Response{CallID: r.GetCallId(), Intents: resp.GetIntents()}
	tool, version := resp.GetTool(), resp.GetMeta().GetSpecVersion()
	if len(in.Intents) > 0 {
		var err error
		if in.Spec, in.NoSpec, err = d.intentSpec(ctx, tool, version); err != nil {
			return intents.Outcome{}, err
		}
	}
	out, err := d.applier.Apply(ctx, tenant, session, in)
	if err != nil {
		return out, err
	}
	if out.Recorded > 0 {
		d.metrics.IntentsRefused(out.Recorded)
		d.log.WarnContext(ctx, "intents refused at apply", "call_id", in.CallID, "tool", tool, "spec_version", version,
			"refused", len(out.Refused), "reason", out.Refused[0].Reason)
	}
	return out, nil
}

// intentSpec is the spec version of tool that a result's intents are
// checked against, or why there is none.
func (d *Dispatcher) intentSpec(ctx context.Context, tool, version string) (*toolwirev1.ToolSpec, string, error) {
	if tool == "" || version == "" {
		return nil, "the result names no tool spec version to check its intents against", nil
	}
	ent, err := d.reg.GetVersion(ctx, tool, version)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return nil, fmt.Sprintf("spec version %q of tool %q is not in the registry", version, tool), nil
	case err != nil:
		return nil, "", fmt.Errorf("dispatch: the spec to check intents against: %w", err)
	}
	return ent.Spec, "", nil
}

// refusedEntries are the refusals as the API answers them.
func refusedEntries(callID string, refused []intents.Refusal) []*toolwirev1.AppliedIntent {
	if len(refused) == 0 {
		return nil
	}
	entries := make([]*toolwirev1.AppliedIntent, len(refused))
	for i, r := range refused {
		entries[i] = r.Entry(callID)
	}
	return entries
}

// ErrNoSession: intents were to be applied, but the call names no session.
var ErrNoSession = errors.New("dispatch: apply_intents needs a session")

// GetSession returns the reference applier's state of a session of the
// caller's tenant.
func (d *Dispatcher) GetSession(ctx context.Context, id identity.Identity, session string) (*toolwirev1.Session, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if session == "" {
		return nil, ErrNoSession
	}
	return d.applier.Get(ctx, id.Tenant, session)
}

// ApplyIntents applies the intents of a finished call of the caller's
// tenant to the call's session, each once, refusing those its tool's spec
// version does not allow (applyResult). It returns ErrUnknownCall for a
// call it does not know, ErrNotFinished while the call runs, and
// ErrNoSession when the call named no session.
func (d *Dispatcher) ApplyIntents(ctx context.Context, id identity.Identity, callID string) (*toolwirev1.ApplyIntentsResponse, error) {
	// A caller may apply a call's intents the instant its result reached
	// it: the result can reach the caller a moment before the results
	// stream serves it, so wait briefly rather than answer "not finished".
	r, err := d.GetResult(ctx, id, callID, applyWait)
	if err != nil {
		return nil, err
	}
	switch r.State {
	case toolwirev1.CallState_CALL_STATE_DONE:
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return nil, ErrNotFinished
	default:
		return nil, ErrUnknownCall
	}
	session := r.Response.GetMeta().GetSession()
	if session == "" {
		return nil, ErrNoSession
	}
	out, err := d.applyResult(ctx, id.Tenant, session, r)
	if err != nil {
		return nil, fmt.Errorf("dispatch: apply intents of %s: %w", callID, err)
	}
	return &toolwirev1.ApplyIntentsResponse{Session: out.Session, Applied: int32(out.Applied), Skipped: int32(out.Skipped),
		Refused: refusedEntries(callID, out.Refused)}, nil
}

// applyWait bounds how long ApplyIntents waits for a result.
const applyWait = 2 * time.Second

// ErrNotFinished: the call has no result yet.
var ErrNotFinished = errors.New("dispatch: the call has not finished")
