package api

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/toolwire/toolwire/internal/profiles"
)

// DefaultCompressMinBytes is Config.CompressMinBytes when it is 0.
const DefaultCompressMinBytes = 1 << 10

// Config configures a Service: the dispatcher it serves and the
// components of that dispatcher its RPCs act through (the process,
// internal/dispatchd, hands them over).
type Config struct {
	// Core is the dispatcher. Required.
	Core Core
	// Approvals is its approval flow (Approvals()). Required.
	Approvals Approvals
	// Policies are its policy operations (PolicyOps()). Required.
	Policies Policies
	// Usage reads its limits (LimitGate()). Required.
	Usage Usage
	// CompressMinBytes is the smallest response compressed when a client
	// accepts gzip: a small response is not worth compressing, gzip
	// costs more than the bytes it saves on a typical tool response.
	// 0 = DefaultCompressMinBytes (1 KiB); negative is refused.
	CompressMinBytes int
	// Profiles are the client profiles a Call's or GetResult's answer may
	// be rendered with, named by the request's profiles.Header (profile.go);
	// nil = the shipped ones (profiles.Shipped).
	Profiles *profiles.Set
}

// WithDefaults returns a copy of c with every zero field that has a
// default set to it.
func (c Config) WithDefaults() Config {
	c.CompressMinBytes = cmp.Or(c.CompressMinBytes, DefaultCompressMinBytes)
	if c.Profiles == nil {
		c.Profiles = profiles.Shipped()
	}
	return c
}

// Validate reports the first field of c that is invalid, naming it.
func (c Config) Validate() error {
	switch {
	case c.Core == nil:
		return errors.New("api: Core is required")
	case c.Approvals == nil:
		return errors.New("api: Approvals is required")
	case c.Policies == nil:
		return errors.New("api: Policies is required")
	case c.Usage == nil:
		return errors.New("api: Usage is required")
	case c.CompressMinBytes < 0:
		return fmt.Errorf("api: CompressMinBytes %d is negative", c.CompressMinBytes)
	}
	return nil
}
