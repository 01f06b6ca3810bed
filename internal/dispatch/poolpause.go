package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
)

// Pausing a pool (doc.go, "Paused pools"): one piece of logic for the
// dashboard's Pause and Resume buttons (and any face that adds them).

// ErrPauseScope: pausing or resuming a pool needs the "admin" and
// "installation" scopes (identity.Identity.AdministersInstallation): a
// pool serves every tenant, so a tenant's admin may not.
var ErrPauseScope = errors.New(`dispatch: pausing or resuming a pool needs the "admin" and "installation" scopes: a pool serves every tenant`)

// ErrPauseReason is returned for a pause reason over
// bus.MaxPauseReasonBytes or not UTF-8.
var ErrPauseReason = fmt.Errorf("dispatch: a pause reason is UTF-8 text of at most %d bytes", bus.MaxPauseReasonBytes)

// ErrNoPool is returned for a pool that has no consumer, and for a name
// that cannot be a pool's (bus.ValidPoolName), which is not echoed.
var ErrNoPool = bus.ErrNoPool

// errPoolName is the answer to a name that cannot be a pool's.
var errPoolName = fmt.Errorf("%w: a pool's name is 1 to 64 letters, digits, '_' or '-'", ErrNoPool)

// PausePool pauses pool for every replica and worker (bus.PausePool:
// its consumer delivers nothing until ResumePool), recording id's
// tenant/agent, the time and reason with it, and logs it at info. Calls
// already queued stay queued; new calls to the pool are refused
// OVERLOADED (internal/poolview, "Paused pools"). It returns
// ErrPauseScope, ErrNoPool, ErrPauseReason or bus.ErrPauseOverlapped
// (the pause is not in force).
func (d *Dispatcher) PausePool(ctx context.Context, id identity.Identity, pool, reason string) (*bus.PoolPause, error) {
	if !id.AdministersInstallation() {
		return nil, ErrPauseScope
	}
	if bus.ValidPoolName(pool) != nil { // before it reaches a subject (doc.go, "Paused pools")
		return nil, errPoolName
	}
	if len(reason) > bus.MaxPauseReasonBytes || !utf8.ValidString(reason) {
		return nil, ErrPauseReason
	}
	rec := bus.PoolPause{By: id.Tenant + "/" + id.Agent, At: time.Now().UTC(), Reason: reason}
	if _, err := d.bus.PausePool(ctx, pool, rec); err != nil {
		return nil, err
	}
	d.log.InfoContext(ctx, "pool paused", "pool", pool, "by", rec.By, "reason", reason)
	d.load.Reread(ctx)
	return &rec, nil
}

// ResumePool ends pool's pause (bus.ResumePool): its queued calls are
// delivered again, and new calls admitted. It logs who resumed it at
// info. It returns ErrPauseScope, ErrNoPool or bus.ErrPauseOverlapped
// (the resume is not in force).
func (d *Dispatcher) ResumePool(ctx context.Context, id identity.Identity, pool string) error {
	if !id.AdministersInstallation() {
		return ErrPauseScope
	}
	if bus.ValidPoolName(pool) != nil {
		return errPoolName
	}
	if _, err := d.bus.ResumePool(ctx, pool); err != nil {
		return err
	}
	d.log.InfoContext(ctx, "pool resumed", "pool", pool, "by", id.Tenant+"/"+id.Agent)
	d.load.Reread(ctx)
	return nil
}
