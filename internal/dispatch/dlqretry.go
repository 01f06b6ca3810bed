package dispatch

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/dlq"
)

// serveDLQRetries answers `toolctl dlq retry` (dlq.RequestRetry): the
// dispatcher republishes the dead call, since an operator's NATS
// credentials may not publish calls (bus.RoleOperator). Every replica
// serves it in one queue group.
func (d *Dispatcher) serveDLQRetries(ctx context.Context) (*nats.Subscription, error) {
	q, err := dlq.Open(ctx, d.bus.NC, d.bus.Config.Prefix)
	if err != nil {
		return nil, err
	}
	return dlq.ServeRetries(d.bus.NC, q, d.log.With("component", "dlq-retry"))
}
