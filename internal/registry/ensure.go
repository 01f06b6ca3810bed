package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// ensure checks an OpEnsure and makes the pool's consumer: every subject
// must be one tool's (no wildcard beyond the tenant), of the pool's type,
// and a tool with a source in the registry (a worker claims before it
// asks). A live pool's subject is the one the pool holds the tool by; a
// shadow pool's is the replay subject of a tool held by a pool its
// signing key is enrolled or trusted for, never by the shadow pool
// itself (replays carry the original calls' arguments: a pool reads no
// other pool's). A consumer is live or shadow, never both, and an
// existing shadow consumer's other filters are checked for the asking
// key too (existing). The settings are bus.PoolConfig's, validated
// there; an overlap with another pool is refused. A live pool's consumer made forgets the absence recorded
// against its tools (Source.MissingSince). inProcess: the dispatcher's
// own workers (Announce).
func (r *Registrar) ensure(ctx context.Context, a Announcement, inProcess bool) (Announced, error) {
	refuse := func(format string, args ...any) error {
		return &RefusedError{Reason: fmt.Sprintf("pool %q consumer: ", a.Pool) + fmt.Sprintf(format, args...)}
	}
	c := a.Consumer
	if c == nil || len(c.Subjects) == 0 {
		return Announced{}, refuse("no subjects: a pool's consumer filters its own tools' calls")
	}
	p := bus.PoolConfig{Name: a.Pool, Type: a.Type, Subjects: c.Subjects, AckWait: c.AckWait, MaxDeliver: c.MaxDeliver,
		MaxAckPending: c.MaxAckPending, Shadow: c.Shadow}
	if err := p.WithDefaults().Validate(); err != nil {
		return Announced{}, refuse("%v", err)
	}
	for _, subject := range c.Subjects {
		if err := r.poolSubject(ctx, a, subject, inProcess); err != nil {
			return Announced{}, refuse("%s: %v", subject, err)
		}
	}
	if err := r.existing(ctx, a, inProcess); err != nil {
		return Announced{}, err
	}
	cons, err := r.b.EnsurePool(ctx, p)
	if errors.Is(err, bus.ErrPoolOverlap) || errors.Is(err, bus.ErrPoolKind) {
		return Announced{}, refuse("%v", err)
	}
	if err != nil {
		return Announced{}, fmt.Errorf("registry: %w", err)
	}
	if !c.Shadow { // its consumer is back: it keeps its tools (Claim)
		tools := make([]string, 0, len(c.Subjects))
		for _, subject := range c.Subjects {
			tools = append(tools, subject[strings.LastIndexByte(subject, '.')+1:])
		}
		ServingAgain(ctx, r.kv, a.Pool, tools)
	}
	r.log.DebugContext(ctx, "pool consumer ensured", "pool", a.Pool, "worker", a.Worker, "consumer", cons.CachedInfo().Name)
	return Announced{Consumer: cons.CachedInfo().Name}, nil
}

// existing checks the consumer a's pool already has, whose filters
// EnsurePool keeps: it must be of a's kind (live or shadow,
// bus.ErrPoolKind), and a shadow consumer's other filters must pass
// poolSubject for a too: whoever joins a shadow pool fetches every
// replay it filters, so a key that may not read one of them gets a
// shadow pool of its own.
func (r *Registrar) existing(ctx context.Context, a Announcement, inProcess bool) error {
	name := r.cfg.PoolConsumer(a.Pool)
	cons, err := r.calls.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry: consumer %s: %w", name, err)
	}
	shadow := a.Consumer.Shadow
	filters := bus.ConsumerFilters(cons.CachedInfo().Config)
	mixed := slices.ContainsFunc(filters, r.b.Subjects.IsShadowFilter) &&
		slices.ContainsFunc(filters, func(f string) bool { return !r.b.Subjects.IsShadowFilter(f) })
	for _, f := range filters {
		if !shadow && mixed && r.b.Subjects.IsShadowFilter(f) {
			continue // a live pool's consumer that an earlier version let replays join: bus.EnsurePool drops them
		}
		if r.b.Subjects.IsShadowFilter(f) != shadow {
			return &RefusedError{Reason: fmt.Sprintf("pool %q consumer: %v: %s filters %s; a shadow pool has a name of its own (default shadow-<type>)",
				a.Pool, bus.ErrPoolKind, name, f)}
		}
		if !shadow || slices.Contains(a.Consumer.Subjects, f) {
			continue
		}
		if err := r.poolSubject(ctx, a, f, inProcess); err != nil {
			return &RefusedError{Reason: fmt.Sprintf("pool %q consumer: %s already filters %s, which this worker may not read (%v): give its shadow pool a name of its own",
				a.Pool, name, f, err)}
		}
	}
	return nil
}

// poolSubject checks one subject of a's consumer (ensure).
func (r *Registrar) poolSubject(ctx context.Context, a Announcement, subject string, inProcess bool) error {
	s := r.cfg.Subjects()
	kind := "call"
	if a.Consumer.Shadow {
		kind = "shadow"
	}
	// <prefix>.<kind>.<type>.*.<provider>.<tool>
	rest, ok := strings.CutPrefix(subject, s.Prefix+"."+kind+"."+bus.TypeToken(a.Type)+".*.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 2 || parts[0] == "" || parts[1] == "" || strings.ContainsAny(rest, "*>") {
		return fmt.Errorf("not a %s subject of one %s tool (%s)", kind, bus.TypeToken(a.Type), s.Prefix+"."+kind+"."+bus.TypeToken(a.Type)+".*.<provider>.<tool>")
	}
	tool := parts[1]
	if !NameRe.MatchString(tool) {
		return fmt.Errorf("tool %q: name must match %s", tool, NameRe)
	}
	e, err := r.kv.Get(ctx, SourceKey(tool))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return fmt.Errorf("tool %q has no source: the pool claims its tools before it asks for their consumer", tool)
	}
	if err != nil {
		return fmt.Errorf("source of %s: %w", tool, err)
	}
	src, ok := decodeSource(e.Value())
	live := s.Prefix + ".call." + bus.TypeToken(a.Type) + ".*." + rest
	switch {
	case !ok:
		return fmt.Errorf("tool %q: its source does not decode", tool)
	case src.Subject != live:
		return fmt.Errorf("tool %q is held by %s on %s", tool, src, src.Subject)
	case a.Consumer.Shadow && src.Pool == a.Pool:
		return fmt.Errorf("tool %q is held by pool %q itself: a shadow pool has a name of its own (default shadow-<type>), never a live pool's", tool, a.Pool)
	case a.Consumer.Shadow:
		return r.signsFor(ctx, a, src, inProcess)
	case src.Pool != a.Pool:
		return fmt.Errorf("tool %q is defined by %s", tool, src)
	}
	return nil
}

// signsFor refuses a shadow consumer over the replays of src's tool
// unless a's signing key may sign for src's pool: enrolled for it, or
// trusted for it (--worker-keys: the local worker key, trusted for every
// pool, or a key listed for the pool; the tools of the dispatcher's
// in-process pool are enrolled with the dispatcher's key only), or a
// dispatcher's key, or a is the dispatcher's in-process worker's.
func (r *Registrar) signsFor(ctx context.Context, a Announcement, src Source, inProcess bool) error {
	if a.Signer == "" && inProcess {
		return nil
	}
	if a.Signer != "" && r.trust != nil && r.trust.Allows(a.Signer, src.Pool) == nil {
		return nil
	}
	for _, k := range []string{signing.PoolKey(a.Signer, src.Pool), signing.DispatcherKey(a.Signer)} {
		_, err := r.kv.Get(ctx, k)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			return fmt.Errorf("enrolment of %s: %w", a.Signer, err)
		}
	}
	return fmt.Errorf("the replays of a tool defined by %s: signing key %s is not enrolled for pool %q (a shadow worker signs with a key of the pool it shadows)",
		src, a.Signer, src.Pool)
}
