package maintenance

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
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
}

// WithDefaults returns a copy of c with its defaults filled in.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first field of c that cannot be used.
func (c Config) Validate() error {
	switch {
	case c.Bus == nil:
		return errors.New("maintenance: Bus is required")
	case c.Name == "":
		return errors.New("maintenance: Name is required")
	}
	return nil
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
