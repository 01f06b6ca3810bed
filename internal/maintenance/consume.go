package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/startstop"
)

// consumption is one durable consumer that every replica shares, consumed
// as a Service: Start makes (or finds) the consumer and consumes it; Stop
// ends the Consume and waits for its last callback. Each message is
// handled within 10s: a failure is logged and the message redelivered
// after a second; success acks it.
type consumption struct {
	name   string // in errors and the ack warning: "reaper", "retry mover"
	ensure func(ctx context.Context) (jetstream.Consumer, error)
	handle func(ctx context.Context, m jetstream.Msg) error
	failed string // logged when handle fails
	log    *slog.Logger
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

// settle handles m and acks it, or redelivers it after a second.
func (c consumption) settle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.handle(ctx, m); err != nil {
		c.log.Error(c.failed, "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	if err := m.Ack(); err != nil {
		c.log.Warn(c.name+" ack failed", "err", err)
	}
}
