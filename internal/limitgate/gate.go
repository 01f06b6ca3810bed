package limitgate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/startstop"
)

// Policies gives the policy in force for a tenant, nil for none (the
// dispatcher's dispatch.PolicySource, a policystore.Holder).
type Policies interface {
	For(tenant string) *policy.Policy
}

// Specs reads a tool's spec at a version (registry.Store): a limit's key
// or cost may depend on the tool's annotations.
type Specs interface {
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

// Defaults of Config.
const (
	DefaultSlotLease   = 30 * time.Second
	DefaultSlotRenew   = 10 * time.Second
	DefaultMaxSlotHold = time.Hour
)

// Config configures a Gate.
type Config struct {
	// JetStream and Bucket are where the limits are counted: the limits
	// KV bucket (bus.Bus.Limits), opened by Start. An empty Bucket means
	// no bucket: a call a limit covers is refused OVERLOADED, and Usage
	// fails for the limits it would read.
	JetStream jetstream.JetStream
	Bucket    string
	// Policies gives the limits in force per tenant; nil = no policy, no
	// limits.
	Policies Policies
	// Specs reads the spec a call pins. Required.
	Specs Specs
	// SlotLease is a concurrency slot's lease: a replica that dies stops
	// renewing its calls' slots, and they come back at most SlotLease
	// after its last renewal. Default 30 s.
	SlotLease time.Duration
	// SlotRenew is how often the held slots are renewed; less than
	// SlotLease. Default 10 s.
	SlotRenew time.Duration
	// MaxSlotHold bounds how long a slot is renewed for a call without a
	// deadline whose result never comes (its publish ended with the
	// caller's context, say, and it was never stored). Default 1 h.
	MaxSlotHold time.Duration
	// Logger receives the gate's warnings. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with the defaults filled in.
func (c Config) WithDefaults() Config {
	c.SlotLease = cmp.Or(c.SlotLease, DefaultSlotLease)
	c.SlotRenew = cmp.Or(c.SlotRenew, DefaultSlotRenew)
	c.MaxSlotHold = cmp.Or(c.MaxSlotHold, DefaultMaxSlotHold)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate returns an error naming the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case c.Specs == nil:
		return errors.New("limitgate: Config.Specs is required")
	case c.Bucket != "" && c.JetStream == nil:
		return errors.New("limitgate: Config.JetStream is required with a Bucket")
	case c.SlotLease < 0, c.SlotRenew < 0, c.MaxSlotHold < 0:
		return errors.New("limitgate: Config.SlotLease, SlotRenew and MaxSlotHold must not be negative")
	case c.SlotRenew >= c.SlotLease:
		return fmt.Errorf("limitgate: Config.SlotRenew (%s) must be less than SlotLease (%s)", c.SlotRenew, c.SlotLease)
	}
	return nil
}

// Gate is the limits step of admission and what it holds afterwards: it
// takes a call's slots, budget units and rate units (Take), gives them
// back for a call that is not published (GiveBack), renews the slots of
// the calls published here until their results come (Hold, Settle), and
// reads the usage of the limits in force (Usage). It is a
// startstop.Service: Start opens the limits store and starts the
// renewal; Stop ends it. Safe for concurrent use.
type Gate struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	store *limits.Store // made by Start; nil before, and without a bucket

	slots   slotHolder
	renewal *startstop.Loop
	life    startstop.Funcs
}

// New returns a Gate; nothing runs until Start.
func New(cfg Config) (*Gate, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, log: cfg.Logger}
	g.slots.calls = map[string]*heldSlots{}
	g.renewal = startstop.Every(g.cfg.SlotRenew, g.renew)
	g.life.StartFunc = g.start
	g.life.StopFunc = g.stop
	return g, nil
}

// Start opens the limits store over the bucket (none without one) and
// starts renewing held slots.
func (g *Gate) Start(ctx context.Context) error { return g.life.Start(ctx) }

// Stop stops renewing slots, waits for the releases under way (no
// release starts any more: the leases of the slots still held end them)
// and closes the store.
func (g *Gate) Stop(ctx context.Context) error { return g.life.Stop(ctx) }

func (g *Gate) start(ctx context.Context) error {
	if g.cfg.Bucket == "" {
		return nil
	}
	s, err := limits.New(ctx, g.cfg.JetStream, limits.Config{Bucket: g.cfg.Bucket, Logger: g.log})
	if err != nil {
		return fmt.Errorf("limitgate: limits: %w", err)
	}
	g.mu.Lock()
	g.store = s
	g.mu.Unlock()
	return g.renewal.Start(ctx)
}

func (g *Gate) stop() <-chan struct{} {
	if g.Store() == nil {
		return startstop.Closed
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.renewal.Stop(context.Background()) // waits for the loop; no other error
		g.slots.close()
		g.Store().Close()
	}()
	return done
}

// Store is the limits store (made by Start), nil before and without a
// bucket. The loop guard counts in it too.
func (g *Gate) Store() *limits.Store {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.store
}

// policyFor returns the policy in force for tenant, nil without a source.
func (g *Gate) policyFor(tenant string) *policy.Policy {
	if g.cfg.Policies == nil {
		return nil
	}
	return g.cfg.Policies.For(tenant)
}
