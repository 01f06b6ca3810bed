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
	// MissingSince is when another pool's claim first found the pool no
	// longer serving the tool (its consumer gone or narrowed): the tool
	// passes to another pool only once it has been missing for the
	// claim's grace period, so that a pool whose consumer is being put
	// back (a worker repairs it within seconds) keeps its tools. Cleared
	// when the pool claims the tool again or has its consumer made, or
	// when the claim that recorded it finds the pool serving once more.
	MissingSince time.Time `json:"missing_since,omitzero"`
}

func (s Source) String() string {
	missing := ""
	if !s.MissingSince.IsZero() {
		missing = fmt.Sprintf("; not serving it since %s", s.MissingSince.Format(time.RFC3339))
	}
	if s.Worker == "" {
		return fmt.Sprintf("pool %q (calls on %s%s)", s.Pool, s.Subject, missing)
	}
	return fmt.Sprintf("pool %q (worker %s, calls on %s%s)", s.Pool, s.Worker, s.Subject, missing)
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
	if !e.Holder.MissingSince.IsZero() {
		return fmt.Sprintf("registry: tool %q is defined by %s; %s defines a different tool of that name: the tool passes to it "+
			"if its pool still does not serve it %s after that (claim again then), or rename one of them",
			e.Tool, e.Holder, e.Claimant, ClaimGrace)
	}
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
	// Grace is how long a new claim holds without asking Held, and how
	// long a holder must have been found not serving the tool before
	// another pool takes it over. Default ClaimGrace; negative = Held is
	// always asked, and a holder not serving is taken over at once.
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
//     or the holder has not served it for the grace period: Held (not
//     asked within the grace period of the claim) reports that its pool's
//     consumer is gone, or no longer filters the holder's subject, and
//     did so a grace period ago already (Source.MissingSince, recorded
//     by the first claim that found it so, and refused). Then src takes
//     it over (written against the claim's revision). A holder whose
//     consumer is put back in the meantime (its worker repairs it within
//     seconds, through a dispatcher) keeps the tool: another pool cannot
//     win it in the moment the consumer is missing.
//
// A tool published before sources were recorded has none: its first
// claimant takes it. spec must be stamped (Stamp).
func Claim(ctx context.Context, kv jetstream.KeyValue, spec *toolwirev1.ToolSpec, src Source, o ClaimOptions) error {
	if o.Held == nil {
		return errors.New("registry: claim: ClaimOptions.Held is required")
	}
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
				if !holder.MissingSince.IsZero() { // serving again: forget it
					_, _ = kv.Update(ctx, SourceKey(name), val, e.Revision())
				}
				return nil
			}
		case holder.Pool != "":
			same, err := isCurrent(ctx, kv, spec)
			if err != nil || same {
				return err
			}
			holder, take, again, err := weighHolder(ctx, kv, e, o)
			switch {
			case err != nil:
				return fmt.Errorf("registry: claim %s: %w", name, err)
			case again:
				continue // the record changed meanwhile: read it again
			case !take:
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

// weighHolder decides whether another pool may take over the tool that
// the holder of entry e holds (Claim): not within the grace period of the
// claim, not while Held says the holder serves it (a recorded absence is
// then forgotten), not before it has been found not serving for the
// grace period (the first finding is recorded in the returned holder's
// MissingSince, and forgotten again if Held, asked once more after the
// record, says the holder serves: its consumer was put back meanwhile).
// again: that record lost a race; read the entry again.
func weighHolder(ctx context.Context, kv jetstream.KeyValue, e jetstream.KeyValueEntry, o ClaimOptions) (
	holder Source, take, again bool, _ error) {
	holder, _ = decodeSource(e.Value())
	grace := cmp.Or(o.Grace, ClaimGrace)
	if time.Since(e.Created()) < grace {
		return holder, false, false, nil // its pool may not have extended its consumer yet
	}
	live, err := o.Held(ctx, holder)
	if err != nil {
		return holder, false, false, fmt.Errorf("is %s still serving it: %w", holder, err)
	}
	if live || grace < 0 || !holder.MissingSince.IsZero() {
		if live && !holder.MissingSince.IsZero() { // back: forget the absence
			back := holder
			back.MissingSince = time.Time{}
			if b, err := json.Marshal(back); err == nil {
				_, _ = kv.Update(ctx, e.Key(), b, e.Revision())
			}
		}
		return holder, !live && (grace < 0 || time.Since(holder.MissingSince) >= grace), false, nil
	}
	holder.MissingSince = time.Now().UTC()
	b, err := json.Marshal(holder)
	if err != nil {
		return holder, false, false, err
	}
	rev, err := kv.Update(ctx, e.Key(), b, e.Revision())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return holder, false, true, nil
		}
		return holder, false, false, fmt.Errorf("record that %s does not serve it: %w", holder, err)
	}
	// The holder's consumer may have been put back between Held and the
	// record, its ServingAgain finding nothing to forget: look again, and
	// forget the absence if it serves. Put back after this look, its
	// ServingAgain comes after the record and forgets it.
	if live, err := o.Held(ctx, holder); err == nil && live {
		back := holder
		back.MissingSince = time.Time{}
		if b, err := json.Marshal(back); err == nil {
			_, _ = kv.Update(ctx, e.Key(), b, rev)
		}
		return back, false, false, nil
	}
	return holder, false, false, nil
}

// ServingAgain forgets the recorded absence (Source.MissingSince) of
// pool from the tools it holds among tools: its consumer is back. Best
// effort: a record that changed meanwhile is left.
func ServingAgain(ctx context.Context, kv jetstream.KeyValue, pool string, tools []string) {
	for _, tool := range tools {
		e, err := kv.Get(ctx, SourceKey(tool))
		if err != nil {
			continue
		}
		src, ok := decodeSource(e.Value())
		if !ok || src.Pool != pool || src.MissingSince.IsZero() {
			continue
		}
		src.MissingSince = time.Time{}
		if b, err := json.Marshal(src); err == nil {
			_, _ = kv.Update(ctx, e.Key(), b, e.Revision())
		}
	}
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
