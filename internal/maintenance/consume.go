package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/startstop"
)

// consumption is one durable consumer that every replica shares, consumed
// as a Service: Start makes (or finds) the consumer and consumes it; Stop
// ends the Consume and waits for its last callback. Each message is
// handled within 10s: success acks it; a failure is logged and the
// message redelivered after Config.retryDelay of its delivery count (1s
// doubling to 30s), for as long as it takes: the consumers have no
// MaxDeliver, and a message is never terminated for a failure that may
// pass. A handler drops a message (returns nil) only when no later try
// could do better (an unreadable advisory, a call aged out of its stream).
type consumption struct {
	name   string // in errors and the ack warning: "reaper", "retry mover"
	ensure func(ctx context.Context) (jetstream.Consumer, error)
	handle func(ctx context.Context, m jetstream.Msg) error
	failed string // logged when handle fails
	cfg    Config
}

// service returns c as a Service.
func (c consumption) service() *startstop.Funcs {
	f := &startstop.Funcs{}
	f.StartFunc = func(ctx context.Context) error {
		cons, err := c.ensure(ctx)
		if err != nil {
			return fmt.Errorf("maintenance: %s: %w", c.name, err)
		}
		cc, err := cons.Consume(c.settle)
		if err != nil {
			return fmt.Errorf("maintenance: %s: %w", c.name, err)
		}
		// Under f's lock, which Stop reads StopFunc under.
		f.StopFunc = func() <-chan struct{} {
			cc.Stop()
			return cc.Closed()
		}
		return nil
	}
	return f
}

// settle handles m and acks it, or redelivers it after a delay that grows
// with its deliveries.
func (c consumption) settle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.handle(ctx, m); err != nil {
		delivered := uint64(1)
		if md, mdErr := m.Metadata(); mdErr == nil {
			delivered = md.NumDelivered
		}
		delay := c.cfg.retryDelay(delivered)
		c.cfg.Logger.Error(c.failed, "err", err, "deliveries", delivered, "retry_in", delay)
		if err := m.NakWithDelay(delay); err != nil {
			// Redelivered after AckWait instead.
			c.cfg.Logger.Warn(c.name+" nak failed", "err", err)
		}
		return
	}
	if err := m.Ack(); err != nil {
		c.cfg.Logger.Warn(c.name+" ack failed", "err", err)
	}
}
