package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limitgate"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The limits step of admission (internal/limitgate): the last before
// publishing, so a call any earlier step refuses spends nothing.

// limitStep is a call at the limits step.
type limitStep struct {
	id    identity.Identity
	o     *toolwirev1.CallRequest
	w     *waiter // released on a refusal; nil for none
	limit limitgate.Call
}

// limitCall takes the call's limits (limitgate.Gate.Take; a call made by
// a hook is not counted). A refusal is recorded and answered (the waiter
// released, the idempotency key released after the refusal is recorded,
// so a retry with the key finds it), and returned as refused.
func (d *Dispatcher) limitCall(ctx context.Context, s limitStep) (*limitgate.Ticket, *Submitted) {
	if isHookCall(ctx) {
		return nil, nil
	}
	t, refused := d.limitGate.Take(ctx, s.limit)
	if refused == nil {
		return t, nil
	}
	if s.w != nil {
		s.w.cancel()
	}
	sub := d.refuseDecided(ctx, s.id, s.o, s.limit.Call.CallId, refused.Error, refused.Decision, s.limit.Now)
	if s.o.IdempotencyKey != "" {
		d.releaseKey(s.id, s.o)
	}
	return nil, sub
}

// UsageFilter names whose usage to read (limitgate.UsageFilter).
type UsageFilter = limitgate.UsageFilter

// Usage is one limit's state for one key (limitgate.Usage).
type Usage = limitgate.Usage

// Usage reads the limits in force for the caller's tenant as they stand
// for f's agent, session, user and run (limitgate.Gate.Usage).
func (d *Dispatcher) Usage(ctx context.Context, id identity.Identity, f UsageFilter) ([]Usage, error) {
	return d.limitGate.Usage(ctx, id, f)
}
