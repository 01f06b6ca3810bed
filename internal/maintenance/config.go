package maintenance

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dlq"
)

// Config is what every maintenance service runs with.
type Config struct {
	// Bus is the JetStream layout the service reads and writes. Required.
	Bus *bus.Bus
	// Name is the replica's routing name; dead letters name it as their
	// writer ("reaper:<name>", "sweeper:<name>"). Required.
	Name string
	// Logger receives the service's warnings and errors. Default
	// slog.Default().
	Logger *slog.Logger
	// RetryDelay is how long a service waits before it tries again what
	// it failed to handle for a reason that may pass (a lookup or a
	// publish that failed or timed out): a reaped advisory, a due retry,
	// an overdue call. It doubles with each failure of the same item up
	// to MaxRetryDelay; the item is tried for as long as it takes, never
	// dropped. Default 1s.
	RetryDelay time.Duration
	// MaxRetryDelay bounds RetryDelay's growth. Default 30s.
	MaxRetryDelay time.Duration
	// RetryCheck decides whether a dead letter's call may be retried now
	// (DLQRetries: dlq.Queue.CheckWith); the dispatcher's CheckRetry.
	// Nil: every retry is queued.
	RetryCheck dlq.Check
}

// WithDefaults returns a copy of c with its defaults filled in.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.RetryDelay = cmp.Or(c.RetryDelay, time.Second)
	c.MaxRetryDelay = cmp.Or(c.MaxRetryDelay, 30*time.Second)
	return c
}

// Validate reports the first field of c that cannot be used.
func (c Config) Validate() error {
	switch {
	case c.Bus == nil:
		return errors.New("maintenance: Bus is required")
	case c.Name == "":
		return errors.New("maintenance: Name is required")
	case c.RetryDelay < 0:
		return fmt.Errorf("maintenance: RetryDelay %s must not be negative", c.RetryDelay)
	case c.MaxRetryDelay < c.RetryDelay:
		return fmt.Errorf("maintenance: MaxRetryDelay %s is below RetryDelay %s", c.MaxRetryDelay, c.RetryDelay)
	}
	return nil
}

// retryDelay is how long to wait before trying again an item that failed
// failures times (1 or more): RetryDelay doubled per earlier failure, at
// most MaxRetryDelay.
func (c Config) retryDelay(failures uint64) time.Duration {
	d := c.RetryDelay
	for n := uint64(1); n < failures && d < c.MaxRetryDelay; n++ {
		d *= 2
	}
	return min(d, c.MaxRetryDelay)
}

// SweeperConfig is the orphan sweeper's configuration.
type SweeperConfig struct {
	Config
	// Every is how often the sweeper looks for orphaned calls. Default 1m;
	// negative = never (the sweeper does nothing).
	Every time.Duration
	// Grace is how old an orphaned call must be before it is ended.
	// Default 1m.
	Grace time.Duration
}

// WithDefaults returns a copy of c with its defaults filled in.
func (c SweeperConfig) WithDefaults() SweeperConfig {
	c.Config = c.Config.WithDefaults()
	c.Every = cmp.Or(c.Every, time.Minute)
	c.Grace = cmp.Or(c.Grace, time.Minute)
	return c
}

// Validate reports the first field of c that cannot be used.
func (c SweeperConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.Grace < 0 {
		return fmt.Errorf("maintenance: Grace %s must not be negative", c.Grace)
	}
	return nil
}

// OverdueSettings are the overdue sweeper's timings and bound; the zero
// value is the defaults. The dispatcher passes its Config.Overdue.
type OverdueSettings struct {
	// Grace is how long past a call's schedule-to-close deadline the
	// sweeper waits before it answers the call: it covers clock skew
	// between hosts, a worker's lookups between its deadline check and
	// the attempt's start, and the worker's own answer at the deadline
	// (TIMEOUT or EXPIRED), which is better than the sweeper's, and a
	// worker's held result: published for 30 s after the tool ends and
	// until the deadline, each try up to 10 s, so it may be stored up to
	// about 40 s past the deadline. Below 45s a tool that completed may be
	// answered UNKNOWN_OUTCOME; tests only. Default 1m.
	Grace time.Duration
	// Lookback is how far back a starting sweeper reads admission
	// records, so that calls admitted before it started (a restart of
	// every replica) are followed too. Default 1h; negative = none (only
	// calls admitted from the start on).
	Lookback time.Duration
	// NoDeadline is how long after its admission a call without a
	// schedule-to-close deadline may go without a result before the
	// sweeper answers it. Default 1h; negative = never (such calls are
	// not followed).
	NoDeadline time.Duration
	// MaxTracked bounds the calls followed at once (about 300 bytes
	// each); admission records beyond it are dropped, counted
	// (OverdueStats.Dropped) and logged. Default 100000.
	MaxTracked int
}

// OverdueConfig is the overdue sweeper's configuration.
type OverdueConfig struct {
	Config
	OverdueSettings
}

// WithDefaults returns a copy of c with its defaults filled in.
func (c OverdueConfig) WithDefaults() OverdueConfig {
	c.Config = c.Config.WithDefaults()
	c.Grace = cmp.Or(c.Grace, time.Minute)
	c.Lookback = cmp.Or(c.Lookback, time.Hour)
	c.NoDeadline = cmp.Or(c.NoDeadline, time.Hour)
	c.MaxTracked = cmp.Or(c.MaxTracked, 100_000)
	return c
}

// Validate reports the first field of c that cannot be used.
func (c OverdueConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.Grace < 0:
		return fmt.Errorf("maintenance: overdue Grace %s must not be negative", c.Grace)
	case c.MaxTracked < 0:
		return fmt.Errorf("maintenance: MaxTracked %d must not be negative", c.MaxTracked)
	}
	return nil
}
