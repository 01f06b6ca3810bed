package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/startstop"
)

// PushConsumers deletes every push consumer of the calls and dead-letter
// streams, every PushEvery: toolwire reads them with pull consumers only,
// and a push consumer delivers stored messages onto whatever subject its
// creator named — a subject the creator may not publish on, which
// nats-server does not check (finding 7 of issue 27). The worker and
// operator roles may create consumers there (pool consumers, scan slots)
// and the create request's body, where a deliver subject travels, is not
// visible to NATS permissions: so it is repaired after the fact. Each
// deletion is logged at WARN with the consumer and its deliver subject.
type PushConsumers struct {
	cfg  Config
	loop *startstop.Loop
}

// PushEvery is how often PushConsumers looks.
const PushEvery = 5 * time.Second

var _ startstop.Service = (*PushConsumers)(nil)

// NewPushConsumers returns the service with cfg; Start starts it.
func NewPushConsumers(cfg Config) *PushConsumers {
	p := &PushConsumers{cfg: cfg.WithDefaults()}
	p.loop = startstop.NewLoop(p.run)
	return p
}

// Start starts the loop. It returns the configuration's Validate error.
func (p *PushConsumers) Start(ctx context.Context) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	return p.loop.Start(ctx)
}

// Stop ends the loop and waits for it.
func (p *PushConsumers) Stop(ctx context.Context) error { return p.loop.Stop(ctx) }

func (p *PushConsumers) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for _, s := range []jetstream.Stream{p.cfg.Bus.Calls, p.cfg.Bus.DLQ} {
			if err := p.sweep(sctx, s); err != nil && ctx.Err() == nil {
				p.cfg.Logger.Warn("push consumer sweep failed; trying again at the next", "err", err)
			}
		}
		cancel()
		t.Reset(PushEvery)
	}
}

// sweep deletes the push consumers of s.
func (p *PushConsumers) sweep(ctx context.Context, s jetstream.Stream) error {
	l := s.ListConsumers(ctx)
	var push []*jetstream.ConsumerInfo
	for info := range l.Info() {
		if info.Config.DeliverSubject != "" {
			push = append(push, info)
		}
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", s.CachedInfo().Config.Name, err)
	}
	var errs []error
	for _, info := range push {
		err := s.DeleteConsumer(ctx, info.Name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			errs = append(errs, fmt.Errorf("delete push consumer %s: %w", info.Name, err))
			continue
		}
		p.cfg.Logger.Warn("push consumer deleted: toolwire reads its streams with pull consumers only",
			"stream", info.Stream, "consumer", info.Name, "deliver_subject", info.Config.DeliverSubject)
	}
	return errors.Join(errs...)
}
