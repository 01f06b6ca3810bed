package dispatch

import (
	"context"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limitgate"
)

// The limits of the policy in force are counted by internal/limitgate;
// admission's step is admit_limits.go.

// UsageFilter names whose usage to read (limitgate.UsageFilter).
type UsageFilter = limitgate.UsageFilter

// Usage is one limit's state for one key (limitgate.Usage).
type Usage = limitgate.Usage

// Usage reads the limits in force for the caller's tenant as they stand
// for f's agent, session, user and run (limitgate.Gate.Usage).
func (d *Dispatcher) Usage(ctx context.Context, id identity.Identity, f UsageFilter) ([]Usage, error) {
	return d.limitGate.Usage(ctx, id, f)
}

// LimitGate is the replica's limits runtime: the usage reads (GetUsage)
// for the API's faces.
func (d *Dispatcher) LimitGate() *limitgate.Gate { return d.limitGate }
