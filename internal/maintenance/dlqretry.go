package maintenance

import (
	"context"
	"fmt"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/internal/startstop"
)

// DLQRetries answers `toolctl dlq retry` (dlq.RequestRetry): the
// dispatcher republishes the dead call, since an operator's NATS
// credentials may not publish calls (bus.RoleOperator). Every replica
// serves it in one queue group (dlq.ServeRetries), and asks
// Config.RetryCheck before it queues a retry.
type DLQRetries struct {
	cfg Config
	svc startstop.Funcs
}

var _ startstop.Service = (*DLQRetries)(nil)

// NewDLQRetries returns the dead-letter retry service with cfg; Start
// starts it.
func NewDLQRetries(cfg Config) *DLQRetries {
	r := &DLQRetries{cfg: cfg.WithDefaults()}
	r.svc.StartFunc = r.start
	return r
}

// Start subscribes to the retry requests. It returns the configuration's
// Validate error, if any.
func (r *DLQRetries) Start(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	return r.svc.Start(ctx)
}

// Stop unsubscribes and waits until the last request's callback has
// returned.
func (r *DLQRetries) Stop(ctx context.Context) error { return r.svc.Stop(ctx) }

// start runs under r.svc's lock: it sets r.svc.StopFunc.
func (r *DLQRetries) start(ctx context.Context) error {
	nc := r.cfg.Bus.NC
	q, err := dlq.Open(ctx, nc, r.cfg.Bus.Config.Prefix)
	if err == nil {
		q.SignWith(r.cfg.Bus.Signer).CheckWith(r.cfg.RetryCheck)
	}
	if err != nil {
		return fmt.Errorf("maintenance: dead-letter retries: %w", err)
	}
	sub, err := dlq.ServeRetries(nc, q, r.cfg.Logger.With("component", "dlq-retry"))
	if err != nil {
		return fmt.Errorf("maintenance: dead-letter retries: %w", err)
	}
	r.svc.StopFunc = bus.Unsubscriber(sub)
	return nil
}
