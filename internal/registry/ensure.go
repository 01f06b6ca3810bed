package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
)

// ensure checks an OpEnsure and makes the pool's consumer: every subject
// must be one tool's (no wildcard beyond the tenant), of the pool's type,
// and, for a live pool, the subject the pool holds the tool by (the
// registry's source of the tool: a worker claims before it asks); a
// shadow pool's are replay subjects. The settings are bus.PoolConfig's,
// validated there; an overlap with another pool is refused.
func (r *Registrar) ensure(ctx context.Context, a Announcement) (Announced, error) {
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
		if err := r.poolSubject(ctx, a, subject); err != nil {
			return Announced{}, refuse("%s: %v", subject, err)
		}
	}
	cons, err := r.b.EnsurePool(ctx, p)
	if errors.Is(err, bus.ErrPoolOverlap) {
		return Announced{}, refuse("%v", err)
	}
	if err != nil {
		return Announced{}, fmt.Errorf("registry: %w", err)
	}
	r.log.DebugContext(ctx, "pool consumer ensured", "pool", a.Pool, "worker", a.Worker, "consumer", cons.CachedInfo().Name)
	return Announced{Consumer: cons.CachedInfo().Name}, nil
}

// poolSubject checks one subject of a's consumer (ensure).
func (r *Registrar) poolSubject(ctx context.Context, a Announcement, subject string) error {
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
	if a.Consumer.Shadow {
		return nil // replays only: what an operator replays, no call of a tenant
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
	switch {
	case !ok:
		return fmt.Errorf("tool %q: its source does not decode", tool)
	case src.Pool != a.Pool:
		return fmt.Errorf("tool %q is defined by %s", tool, src)
	case src.Subject != subject:
		return fmt.Errorf("tool %q is held by its pool on %s", tool, src.Subject)
	}
	return nil
}
