package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Pools paused by an administrator.
//
// A pool is paused on its consumer, server-side (ConsumerConfig.
// PauseUntil): a paused consumer delivers nothing, to every worker of
// every replica, and the pause outlives every process. PausePool sets it
// together with the record of who paused the pool, when and why, in the
// consumer's metadata (PoolPausedByKey, PoolPausedAtKey,
// PoolPausedReasonKey): the record first, then the pause (the server
// changes a consumer's pause only through its pause API, never through an
// update). ResumePool removes the record, then the pause.
// The pause has no end of its own: PauseUntil is far in the future
// (pauseHorizon) and only ResumePool ends it.
//
// The record is the intent, the pause its effect. A pool consumer whose
// pause has no record (someone paused it through the NATS API with the
// operator credential: nats consumer pause) or whose record has no pause
// (someone resumed it that way) was changed by hand: CheckPool reports
// it in Edited, like any other hand edit, and EnsurePool, which puts it
// back, makes the effect match the record (an unrecorded pause is
// removed, a recorded one applied again). EnsurePool keeps the record: a
// worker that starts, or a replica that declares the consumer again,
// never resumes a paused pool. One race is left: EnsurePool reads the
// consumer, then updates it whole, so a pause or resume that lands in the
// milliseconds between may see its record undone (the pools page and
// toolctl pool list show the consumer as it is). PoolStamp leaves the
// pause out, so a pause is no change of the declared settings.

// Metadata keys of a pool consumer's pause record.
const (
	PoolPausedByKey     = "toolwire_paused_by"
	PoolPausedAtKey     = "toolwire_paused_at"
	PoolPausedReasonKey = "toolwire_paused_reason"
)

// MaxPauseReasonBytes bounds a pause's reason.
const MaxPauseReasonBytes = 512

// pauseHorizon is how far ahead a pause's PauseUntil is set: a pause
// ends when it is resumed, not at a time.
const pauseHorizon = 100 * 365 * 24 * time.Hour

// ErrNoPool is returned by PausePool and ResumePool for a pool that has
// no consumer.
var ErrNoPool = errors.New("bus: no such pool")

// PoolPause is the record of a pool's pause: who paused it (tenant/agent
// of the key), when, and why (may be empty).
type PoolPause struct {
	By     string
	At     time.Time
	Reason string
}

// RecordedPause returns the pause record in a pool consumer's
// configuration, or nil when it has none.
func RecordedPause(cfg jetstream.ConsumerConfig) *PoolPause {
	by := cfg.Metadata[PoolPausedByKey]
	if by == "" {
		return nil
	}
	at, _ := time.Parse(time.RFC3339Nano, cfg.Metadata[PoolPausedAtKey]) // zero when edited by hand
	return &PoolPause{By: by, At: at, Reason: cfg.Metadata[PoolPausedReasonKey]}
}

// PausedNow reports whether a consumer configuration holds a pause that
// has not ended.
func PausedNow(cfg jetstream.ConsumerConfig) bool {
	return cfg.PauseUntil != nil && time.Now().Before(*cfg.PauseUntil)
}

// pauseDrift describes how a consumer's pause and its record disagree
// (an edit by hand), or "" when they agree.
func pauseDrift(cfg jetstream.ConsumerConfig) string {
	rec, paused := RecordedPause(cfg), PausedNow(cfg)
	switch {
	case paused && rec == nil:
		return "pause_until: paused outside toolwire (no record of who paused it) until " + cfg.PauseUntil.UTC().Format(time.RFC3339)
	case !paused && rec != nil:
		return "pause_until: resumed outside toolwire (paused by " + rec.By + ")"
	}
	return ""
}

// keepPause carries live's pause record, if any, into cfg (EnsurePool).
// The pause itself needs no carrying: the server keeps a consumer's
// PauseUntil through every update (only its pause API changes it), and
// matchPause then makes it match the record.
func keepPause(cfg *jetstream.ConsumerConfig, live *jetstream.ConsumerConfig) {
	if live == nil || RecordedPause(*live) == nil {
		return
	}
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	for _, k := range []string{PoolPausedByKey, PoolPausedAtKey, PoolPausedReasonKey} {
		if v, ok := live.Metadata[k]; ok {
			cfg.Metadata[k] = v
		}
	}
}

// matchPause pauses or resumes cons so that its pause matches its record
// (a hand's pause or resume put back), and returns it as it then is.
func (b *Bus) matchPause(ctx context.Context, cons jetstream.Consumer) (jetstream.Consumer, error) {
	info := cons.CachedInfo()
	want := RecordedPause(info.Config) != nil
	if want == PausedNow(info.Config) {
		return cons, nil
	}
	var err error
	if want {
		_, err = b.Calls.PauseConsumer(ctx, info.Name, time.Now().Add(pauseHorizon))
	} else {
		_, err = b.Calls.ResumeConsumer(ctx, info.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("match the pause to its record: %w", err)
	}
	return b.Calls.Consumer(ctx, info.Name)
}

// PausePool pauses pool's consumer and records p with it. Pausing a
// paused pool replaces its record. It returns ErrNoPool when the pool has
// no consumer.
func (b *Bus) PausePool(ctx context.Context, pool string, p PoolPause) (*jetstream.ConsumerInfo, error) {
	if len(p.Reason) > MaxPauseReasonBytes {
		return nil, fmt.Errorf("bus: pause reason longer than %d bytes", MaxPauseReasonBytes)
	}
	return b.updatePause(ctx, pool, func(cfg *jetstream.ConsumerConfig) {
		cfg.Metadata[PoolPausedByKey] = p.By
		cfg.Metadata[PoolPausedAtKey] = p.At.UTC().Format(time.RFC3339Nano)
		cfg.Metadata[PoolPausedReasonKey] = p.Reason
	})
}

// ResumePool ends pool's pause and removes its record (a pool that is
// not paused is left as it is). It returns ErrNoPool when the pool has no
// consumer.
func (b *Bus) ResumePool(ctx context.Context, pool string) (*jetstream.ConsumerInfo, error) {
	return b.updatePause(ctx, pool, func(cfg *jetstream.ConsumerConfig) {
		delete(cfg.Metadata, PoolPausedByKey)
		delete(cfg.Metadata, PoolPausedAtKey)
		delete(cfg.Metadata, PoolPausedReasonKey)
	})
}

// updatePause updates pool's consumer's record with change, then its
// pause to match (matchPause). The record goes first: a check between
// the two steps sees a record without its pause, or a pause without its
// record, and puts back what the record says, which is where this is
// going. The stamp is left alone (PoolStamp leaves the pause out).
func (b *Bus) updatePause(ctx context.Context, pool string, change func(*jetstream.ConsumerConfig)) (*jetstream.ConsumerInfo, error) {
	name := b.Config.PoolConsumer(pool)
	if Token(pool) != pool {
		return nil, fmt.Errorf("%w: %q", ErrNoPool, pool)
	}
	cons, err := b.Calls.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoPool, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s: %w", name, err)
	}
	cfg := cons.CachedInfo().Config
	if cfg.Metadata[PoolStampKey] == "" {
		return nil, fmt.Errorf("%w: %s (consumer %s is not a pool's)", ErrNoPool, pool, name)
	}
	cfg.Metadata = ownMetadata(cfg.Metadata)
	change(&cfg)
	cons, err = b.Calls.UpdateConsumer(ctx, cfg)
	if err == nil {
		cons, err = b.matchPause(ctx, cons)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s: %w", name, err)
	}
	return cons.CachedInfo(), nil
}
