package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
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
	sess, _, _, err := d.applier.Apply(ctx, id.Tenant, session, resp.CallId, resp.Response.GetIntents())
	if err != nil {
		// The tool ran and its response is stored: answer it, say why the
		// intents are not applied (ApplyIntents can do it later).
		d.log.WarnContext(ctx, "applying intents failed", "call_id", resp.CallId, "err", err)
		resp.ApplyError = err.Error()
		return resp, nil
	}
	resp.Session = sess
	return resp, nil
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
// tenant to the call's session, each once. It returns ErrUnknownCall for a
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
	sess, applied, skipped, err := d.applier.Apply(ctx, id.Tenant, session, callID, r.Response.GetIntents())
	if err != nil {
		return nil, fmt.Errorf("dispatch: apply intents of %s: %w", callID, err)
	}
	return &toolwirev1.ApplyIntentsResponse{Session: sess, Applied: int32(applied), Skipped: int32(skipped)}, nil
}

// applyWait bounds how long ApplyIntents waits for a result.
const applyWait = 2 * time.Second

// ErrNotFinished: the call has no result yet.
var ErrNotFinished = errors.New("dispatch: the call has not finished")
