package callindex

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
)

// Config configures an Index.
type Config struct {
	// Streams are what the feed reads. Zero = none: an index filled with
	// Add only, whose Feed does not start.
	Streams Streams
	// Specs finds the spec versions the index redacts arguments with.
	// Nil = none is found: no argument text is indexed, and result text
	// is redacted of every argument value (fail closed).
	Specs Specs
	// Max is the most calls kept (the newest). 0 = DefaultMax
	// (1,000,000); negative is refused.
	Max int
	// MaxRefusals is the most refused calls kept (the newest REJECTED
	// events, read from Streams.Events), in a ring of their own so that a
	// flood of refusals never pushes admitted calls out. 0 =
	// DefaultMaxRefusals (100,000); negative is refused.
	MaxRefusals int
	// Logger logs the feed's failures (per-message lines at Debug).
	// Nil = slog.Default().
	Logger *slog.Logger
}

// Streams are the installation's streams the feed reads.
type Streams struct {
	// Calls and Results are the CALLS and RESULTS streams (bus.Bus.Calls
	// and Results).
	Calls, Results jetstream.Stream
	// Subjects are the installation's subjects (bus.Bus.Subjects): which
	// CALLS subjects are calls, which are replays.
	Subjects bus.Subjects
	// Keys decides which results are believed (internal/believed): a
	// result that is not is never a call's outcome in the index.
	Keys *signing.Keyring
	// Events is the EVENTS stream (bus.Bus.Events): the feed indexes its
	// REJECTED events, the calls admission refused, when it is set (a
	// rejection a dispatcher did not sign is not believed: skipped). Nil
	// = no refused call is indexed.
	Events jetstream.Stream
}

// StreamsOf returns the streams of the installation b.
func StreamsOf(b *bus.Bus) Streams {
	return Streams{Calls: b.Calls, Results: b.Results, Subjects: b.Subjects, Keys: b.Keys, Events: b.Events}
}

// Specs finds a spec version (registry.Store.GetVersion: its cache, then
// the registry bucket); registry.ErrNotFound says the version has left the
// registry for good.
type Specs interface {
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

// WithDefaults returns a copy of c with every zero field that has a
// default set to it.
func (c Config) WithDefaults() Config {
	c.Max = cmp.Or(c.Max, DefaultMax)
	c.MaxRefusals = cmp.Or(c.MaxRefusals, DefaultMaxRefusals)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c that is invalid, naming it.
func (c Config) Validate() error {
	if c.Max < 0 {
		return fmt.Errorf("callindex: Max %d is negative", c.Max)
	}
	if c.MaxRefusals < 0 {
		return fmt.Errorf("callindex: MaxRefusals %d is negative", c.MaxRefusals)
	}
	if c.Streams.Events != nil && c.Streams.Calls == nil {
		return fmt.Errorf("callindex: Streams needs Calls and Results with Events")
	}
	if c.Streams.Results != nil && c.Streams.Keys == nil {
		return fmt.Errorf("callindex: Streams needs Keys with Results")
	}
	if (c.Streams.Calls == nil) != (c.Streams.Results == nil) {
		return fmt.Errorf("callindex: Streams needs both Calls and Results, or neither")
	}
	return nil
}
