package archive

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/bus"
)

// Config is an archiver's.
type Config struct {
	// Bus is the dispatcher's bus: its streams are archived, its Signer
	// signs the manifests, its Config says each stream's window (MaxAge).
	Bus *bus.Bus
	// Store is the archive store (OpenBucket). The caller closes it.
	Store *blob.Bucket
	// Name is the replica's name, written as each manifest's archiver and
	// the lease's holder. Required.
	Name string
	// Segment is the length of the periods archived as one segment,
	// aligned to the Unix epoch (hours, by default). Default 1h.
	Segment time.Duration
	// Settle is how long after a period ends it counts as closed (every
	// message stored in it is readable). Default 1m.
	Settle time.Duration
	// Every is how often the archiver looks for closed periods and
	// renews its lease. Default 30s.
	Every time.Duration
	// LeaseTTL is how long the lease of the active archiver lasts
	// without renewal: how soon another replica takes over from one that
	// died. Default 30s; at least 2 × Every.
	LeaseTTL time.Duration
	// HoldAhead is how far ahead of the oldest unarchived message the
	// archiver keeps a stream's MaxAge: when that message comes within
	// HoldAhead/2 of the stream's window, the stream's MaxAge is raised
	// (held) to its age plus HoldAhead so that JetStream keeps it.
	// Default 6h, or a quarter of the shortest window when that is less
	// (a HoldAhead above twice a window holds that stream for good: Start
	// warns).
	HoldAhead time.Duration
	// MaxSegmentMessages and MaxSegmentBytes close a segment early within
	// its period (the next one continues the period). Defaults 1,000,000
	// and 256 MiB (compressed).
	MaxSegmentMessages int
	MaxSegmentBytes    int64
	// Logger; nil = slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its
// default.
func (c Config) WithDefaults() Config {
	c.Segment = cmp.Or(c.Segment, time.Hour)
	c.Settle = cmp.Or(c.Settle, time.Minute)
	c.Every = cmp.Or(c.Every, 30*time.Second)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, max(30*time.Second, 2*c.Every))
	c.HoldAhead = cmp.Or(c.HoldAhead, min(6*time.Hour, c.shortestWindow()/4))
	c.MaxSegmentMessages = cmp.Or(c.MaxSegmentMessages, 1_000_000)
	c.MaxSegmentBytes = cmp.Or(c.MaxSegmentBytes, 256<<20)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// shortestWindow is the shortest MaxAge of the archived streams of Bus
// (long without a Bus, so that it bounds nothing).
func (c Config) shortestWindow() time.Duration {
	if c.Bus == nil {
		return 1 << 62
	}
	bc := c.Bus.Config
	return min(bc.CallsWindow(), bc.ResultsWindow(), bc.EventsWindow())
}

// Validate returns an error naming the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Bus == nil || c.Bus.Signer == nil:
		return errors.New("archive: Bus (with a Signer) is required")
	case c.Store == nil:
		return errors.New("archive: Store is required")
	case c.Name == "":
		return errors.New("archive: Name is required")
	case c.Segment < time.Second || c.Settle < 0 || c.Every <= 0 || c.HoldAhead <= 0:
		return fmt.Errorf("archive: Segment %s (at least 1s), Settle %s, Every %s and HoldAhead %s must be positive", c.Segment, c.Settle, c.Every, c.HoldAhead)
	case c.LeaseTTL < 2*c.Every:
		return fmt.Errorf("archive: LeaseTTL %s is below 2 × Every %s", c.LeaseTTL, c.Every)
	case c.MaxSegmentMessages < 1 || c.MaxSegmentBytes < 1:
		return fmt.Errorf("archive: MaxSegmentMessages %d and MaxSegmentBytes %d must be positive", c.MaxSegmentMessages, c.MaxSegmentBytes)
	}
	return nil
}
