package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// SourcePrefix starts the bucket keys recording which pool defines each
// tool; the Store ignores them.
const SourcePrefix = "sources."

// SourceKey is the bucket key holding the Source of a tool.
func SourceKey(name string) string { return SourcePrefix + name }

// Source is who defines a tool: the worker pool that serves it. The pool's
// name identifies it; every replica of a pool, and the next version of
// each in a rolling upgrade, is the same source.
type Source struct {
	// Pool is the pool's name (bus.PoolConfig.Name).
	Pool string `json:"pool"`
	// Subject is the filter the pool consumes the tool's calls with
	// (bus.Subjects.ToolSubject): the source holds the tool while its
	// pool's consumer filters it.
	Subject string `json:"subject"`
	// Worker is the instance that recorded the claim, for messages.
	Worker string `json:"worker,omitempty"`
}

func (s Source) String() string {
	if s.Worker == "" {
		return fmt.Sprintf("pool %q (calls on %s)", s.Pool, s.Subject)
	}
	return fmt.Sprintf("pool %q (worker %s, calls on %s)", s.Pool, s.Worker, s.Subject)
}

// ClaimGrace is how long a new claim holds even though its pool's consumer
// does not filter the tool yet: a worker claims its tools before it
// creates or extends its consumer, so that of two pools starting at once
// with one tool name, the second is refused.
const ClaimGrace = 30 * time.Second

// ErrClaimed matches every *ClaimError.
var ErrClaimed = errors.New("registry: tool defined by another pool")

// ClaimError is returned by Claim for a tool another source defines
// differently.
type ClaimError struct {
	Tool string
	// Holder defines the tool now; Claimant tried to define it too.
	Holder, Claimant Source
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("registry: tool %q is defined by %s; %s defines a different tool of that name: rename one of them, "+
		"or retire the tool from pool %q first (remove %s from that pool's consumer, or delete the consumer)",
		e.Tool, e.Holder, e.Claimant, e.Holder.Pool, e.Holder.Subject)
}

// Is makes errors.Is(err, ErrClaimed) true.
func (e *ClaimError) Is(target error) bool { return target == ErrClaimed }

// ClaimOptions tune Claim.
type ClaimOptions struct {
	// Held reports whether holder still serves the tool (its pool's
	// consumer exists and filters holder.Subject). Required.
	Held func(ctx context.Context, holder Source) (bool, error)
	// Grace is how long a new claim holds without asking Held. Default
	// ClaimGrace; negative = Held is always asked.
	Grace time.Duration
}

// Claim makes src the source of spec's tool before spec is published, or
// refuses with a *ClaimError naming both sources:
//
//   - a tool nobody claimed yet is src's (written with Create: of two
//     claimants at once, one wins, the other sees its claim);
//   - a tool src's pool holds stays src's, whatever version src brings (a
//     rolling upgrade);
//   - a tool another pool holds is refused, unless spec is the registry's
//     current definition of it (the same definition: nothing would change),
//     or Held reports that the holder no longer serves it (its pool's
//     consumer is gone, or no longer filters the holder's subject; not
//     asked within the grace period of the claim): then src takes it over
//     (written against the claim's revision).
//
// A tool published before sources were recorded has none: its first
// claimant takes it. spec must be stamped (Stamp).
func Claim(ctx context.Context, kv jetstream.KeyValue, spec *toolwirev1.ToolSpec, src Source, o ClaimOptions) error {
	if o.Held == nil {
		return errors.New("registry: claim: ClaimOptions.Held is required")
	}
	grace := cmp.Or(o.Grace, ClaimGrace)
	name := spec.GetName()
	val, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("registry: claim %s: %w", name, err)
	}
	for range 3 { // a lost race is read again; a third loss is an error
		if _, err := kv.Create(ctx, SourceKey(name), val); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("registry: claim %s: %w", name, err)
		}
		e, err := kv.Get(ctx, SourceKey(name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since: Create again
		}
		if err != nil {
			return fmt.Errorf("registry: claim %s: %w", name, err)
		}
		var holder Source
		if json.Unmarshal(e.Value(), &holder) != nil || holder.Pool == "" {
			holder = Source{} // unreadable: whoever comes takes it over
		}
		switch {
		case holder.Pool == src.Pool:
			if holder.Subject == src.Subject {
				return nil
			}
		case holder.Pool != "":
			same, err := isCurrent(ctx, kv, spec)
			if err != nil || same {
				return err
			}
			// A claim younger than ClaimGrace holds whatever held says: its
			// pool may not have extended its consumer yet.
			live := time.Since(e.Created()) < grace
			if !live {
				if live, err = o.Held(ctx, holder); err != nil {
					return fmt.Errorf("registry: claim %s: is %s still serving it: %w", name, holder, err)
				}
			}
			if live {
				return &ClaimError{Tool: name, Holder: holder, Claimant: src}
			}
		}
		if _, err := kv.Update(ctx, SourceKey(name), val, e.Revision()); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("registry: claim %s: %w", name, err)
		}
	}
	return fmt.Errorf("registry: claim %s: the claim keeps changing; try again", name)
}

// decodeSource reads a stored Source; false when it is unreadable.
func decodeSource(b []byte) (Source, bool) {
	var s Source
	if json.Unmarshal(b, &s) != nil || s.Pool == "" {
		return Source{}, false
	}
	return s, true
}

// isCurrent reports whether spec is the registry's current definition of
// its tool.
func isCurrent(ctx context.Context, kv jetstream.KeyValue, spec *toolwirev1.ToolSpec) (bool, error) {
	e, err := kv.Get(ctx, spec.GetName())
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("registry: get %s: %w", spec.GetName(), err)
	}
	var cur toolwirev1.ToolSpec
	if proto.Unmarshal(e.Value(), &cur) != nil {
		return false, nil
	}
	return cur.GetVersion() == spec.GetVersion(), nil
}
