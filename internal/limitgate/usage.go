package limitgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/limits"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/registry"
)

var (
	// ErrNotYours: a caller without the admin scope asked for another
	// agent's usage.
	ErrNotYours = fmt.Errorf("limitgate: the usage of another agent needs the %q scope", identity.AdminScope)
	// ErrBadFilter: a name of a UsageFilter is longer than
	// limits.MaxInputBytes.
	ErrBadFilter = errors.New("limitgate: bad usage filter")
	// ErrNoStore: the gate has no limits store (before Start, or without
	// a bucket), so the usage of a limit it would read cannot be read.
	ErrNoStore = errors.New("limitgate: no limits store")
)

// UsageFilter names whose usage to read: the caller's own agent and no
// session when empty.
type UsageFilter struct {
	Agent, Session, User, Run string
}

// Validate refuses (ErrBadFilter) a name longer than
// limits.MaxInputBytes.
func (f UsageFilter) Validate() error {
	for _, v := range []string{f.Agent, f.Session, f.User, f.Run} {
		if len(v) > limits.MaxInputBytes {
			return fmt.Errorf("%w: a name of %d bytes; at most %d", ErrBadFilter, len(v), limits.MaxInputBytes)
		}
	}
	return nil
}

// Usage is one limit's state for one key.
type Usage struct {
	Limit  string
	Reason string
	// Key is how the limit counts (tenant, agent, session, user, run,
	// tool or a CEL expression) and Value the key it was read for; Value
	// is empty and nothing is read for tool and CEL keys (they depend on
	// each call).
	Key, Value  string
	Rate        *policy.LimitRate
	Concurrency int
	// InFlight is how many calls hold a slot now (concurrency limits).
	InFlight int
	Budget   *policy.LimitBudget
	// Used and Remaining are the budget's current window, which ends at
	// ResetAt.
	Used, Remaining int64
	ResetAt         time.Time
}

// Report is what GetUsage answers: the version of the policy in force
// for the caller's tenant and its limits as they stand.
type Report struct {
	PolicyVersion string
	Limits        []Usage
}

// Usage reads the limits in force for the caller's tenant as they stand
// for f's agent, session, user and run (admins may name any of their
// tenant's; other callers only their own agent: ErrNotYours). A limit it
// cannot read fails it (ErrNoStore, or the store's error).
func (g *Gate) Usage(ctx context.Context, id identity.Identity, f UsageFilter) ([]Usage, error) {
	r, err := g.read(ctx, id, f)
	return r.Limits, err
}

// Report is Usage for the GetUsage RPC: it also refuses a filter with a
// name too long to be a key (ErrBadFilter), and says which policy
// version the limits are from.
func (g *Gate) Report(ctx context.Context, id identity.Identity, f UsageFilter) (Report, error) {
	if err := f.Validate(); err != nil {
		return Report{}, err
	}
	return g.read(ctx, id, f)
}

func (g *Gate) read(ctx context.Context, id identity.Identity, f UsageFilter) (Report, error) {
	if f.Agent == "" {
		f.Agent = id.Agent
	}
	if f.Agent != id.Agent && !registry.HasScopes(id.Scopes, []string{identity.AdminScope}) {
		return Report{}, ErrNotYours
	}
	p := g.policyFor(id.Tenant)
	out := Report{PolicyVersion: p.Version()}
	now := time.Now()
	for _, l := range p.Limits() {
		u := Usage{Limit: l.ID, Reason: l.Reason, Key: l.Key, Rate: l.Rate, Concurrency: l.Concurrency, Budget: l.Budget}
		switch l.Key {
		case "tenant":
			u.Value = id.Tenant
		case "agent":
			u.Value = f.Agent
		case "session":
			u.Value = f.Session
		case "user":
			u.Value = f.User
		case "run":
			u.Value = f.Run
		default:
			out.Limits = append(out.Limits, u)
			continue
		}
		if err := g.readKey(ctx, limits.Key{Tenant: id.Tenant, Limit: l.ID, Value: u.Value}, &u, now); err != nil {
			return Report{}, err
		}
		out.Limits = append(out.Limits, u)
	}
	return out, nil
}

// readKey fills u's figures (calls in flight, the budget's window) from
// the store at key, as they are at now.
func (g *Gate) readKey(ctx context.Context, key limits.Key, u *Usage, now time.Time) error {
	store := g.Store()
	if store == nil {
		return ErrNoStore
	}
	if u.Concurrency > 0 {
		n, err := store.InFlight(ctx, key, now)
		if err != nil {
			return fmt.Errorf("limitgate: usage of %q: %w", u.Limit, err)
		}
		u.InFlight = n
	}
	if b := u.Budget; b != nil {
		bu, err := store.Usage(ctx, key, limits.Budget{Limit: b.Units, Window: b.Window}, now)
		if err != nil {
			return fmt.Errorf("limitgate: usage of %q: %w", u.Limit, err)
		}
		u.Used, u.Remaining, u.ResetAt = bu.Used, bu.Remaining, bu.ResetAt
	}
	return nil
}
