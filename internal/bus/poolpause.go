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
// never resumes a paused pool.
//
// The server has no compare-and-set on a consumer's update, and
// EnsurePool reads the consumer (liveConfig, just before its write), then
// writes it whole: a pause or resume whose record lands between the two
// would have its record undone, and the next check would put back the
// stale record (resume the pause, or pause the pool again). So a pause or
// resume reads the consumer back after it (a fresh read, never the
// answer to its own write) and does it again when the record or the
// pause is not what it meant, up to pauseTries times, then fails with
// ErrPauseOverlapped: no face reports a pause or resume that is not in
// force. matchPause decides on a fresh read too, so that an EnsurePool
// never resumes or pauses on its own stale write. What is left: an
// EnsurePool whose read comes before a pause's first write and whose
// write comes after the pause's read back (its one round trip spanning
// the pause's five) drops the record of a pause already reported done,
// or brings back that of a resume; the pools page and toolctl pool list
// then show the pool as it is, and the next check puts it back to the
// record. The same lack of compare-and-set the other way: a pause writes
// back the whole configuration it read, so a filter another replica added
// in between (a new tool's subject) is dropped until the next guard check
// declares it again, as between two replicas' declarations. A recorded
// pause whose end someone set sooner by hand is paused to pauseHorizon
// again by the next EnsurePool (pausedForGood).
// PoolStamp leaves the pause out, so a pause is no change of the
// declared settings.

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

// pausedForGood reports whether cfg's pause lasts as toolwire's do (to
// pauseHorizon): a recorded pause whose end was set sooner by hand is
// paused again to the horizon, so that it does not lapse and let calls
// through until a guard notices.
func pausedForGood(cfg jetstream.ConsumerConfig) bool {
	return cfg.PauseUntil != nil && time.Until(*cfg.PauseUntil) > pauseHorizon/2
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

// liveConfig reads consumer name's configuration again just before
// EnsurePool writes it whole, so that the pause record it keeps is as
// recent as can be (a pause or resume since the listing is kept, not
// undone); listed, what the listing had, is the answer when the read
// fails or the consumer is not there yet.
func (b *Bus) liveConfig(ctx context.Context, name string, listed *jetstream.ConsumerConfig) *jetstream.ConsumerConfig {
	if listed == nil {
		return nil
	}
	cons, err := b.Calls.Consumer(ctx, name)
	if err != nil {
		return listed
	}
	return &cons.CachedInfo().Config
}

// matchPause pauses or resumes cons so that its pause matches its record
// (a hand's pause or resume put back), and returns it as it then is. It
// decides on what the server holds now (a fresh read), not on what the
// caller wrote: another replica's write may have landed since (a pause
// whose record it wrote, or removed), and a decision on the caller's own
// write would undo it.
func (b *Bus) matchPause(ctx context.Context, cons jetstream.Consumer) (jetstream.Consumer, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the pause: %w", err)
	}
	want := RecordedPause(info.Config) != nil
	if paused := PausedNow(info.Config); want == paused && (!want || pausedForGood(info.Config)) {
		return cons, nil
	}
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

// pauseTries bounds how many times updatePause writes a pause or resume
// again when another change of the consumer overlapped it.
const pauseTries = 3

// ErrPauseOverlapped is returned by PausePool and ResumePool when other
// changes of the pool's consumer (workers starting, replicas declaring
// it: EnsurePool) undid the pause or resume pauseTries times in a row:
// it may not be in force (another admin's change may have won, or a
// worker may put a recorded pause back): list the pools and ask again.
var ErrPauseOverlapped = errors.New("bus: other changes of the pool's consumer (workers starting, replicas declaring it) kept undoing the pause or resume: it may not be in force; check the pools (toolctl pool list) and try again")

// errPoolName is the answer to a name that cannot be a pool's
// (ValidPoolName), which is not echoed: it may be long.
var errPoolName = fmt.Errorf("%w: a pool's name is 1 to 64 letters, digits, '_' or '-'", ErrNoPool)

// updatePause updates pool's consumer's record with change, then its
// pause to match (matchPause), then reads the consumer again: when the
// record or the pause is not what change meant (another replica's
// EnsurePool, which read the consumer before this write, wrote it whole
// after, dropping or bringing back the record), it does it all again, up
// to pauseTries times, then returns ErrPauseOverlapped; no face reports a
// pause or resume that is not in force. The record goes first: a check
// between the two steps sees a record without its pause, or a pause
// without its record, and puts back what the record says, which is where
// this is going. The stamp is left alone (PoolStamp leaves the pause
// out). The name is checked before it goes into a subject: a long one
// would pass the server's control line limit, and the server would close
// the connection.
func (b *Bus) updatePause(ctx context.Context, pool string, change func(*jetstream.ConsumerConfig)) (*jetstream.ConsumerInfo, error) {
	if ValidPoolName(pool) != nil {
		return nil, errPoolName
	}
	name := b.Config.PoolConsumer(pool)
	for try := 1; ; try++ {
		info, held, err := b.pauseOnce(ctx, pool, change)
		switch {
		case err != nil:
			return nil, err
		case held:
			return info, nil
		case try == pauseTries:
			return nil, fmt.Errorf("bus: consumer %s: %w", name, ErrPauseOverlapped)
		}
		b.log.Warn("a pause or resume was undone by another change of the pool's consumer: doing it again", "consumer", name, "try", try)
	}
}

// pauseOnce is one try of updatePause: it reports the consumer as read
// after it, and whether the record and the pause are what change meant.
func (b *Bus) pauseOnce(ctx context.Context, pool string, change func(*jetstream.ConsumerConfig)) (*jetstream.ConsumerInfo, bool, error) {
	name := b.Config.PoolConsumer(pool)
	cons, err := b.Calls.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, false, fmt.Errorf("%w: %s", ErrNoPool, pool)
	}
	if err != nil {
		return nil, false, fmt.Errorf("bus: consumer %s: %w", name, err)
	}
	cfg := cons.CachedInfo().Config
	if cfg.Metadata[PoolStampKey] == "" {
		return nil, false, fmt.Errorf("%w: %s (consumer %s is not a pool's)", ErrNoPool, pool, name)
	}
	cfg.Metadata = ownMetadata(cfg.Metadata)
	change(&cfg)
	cons, err = b.Calls.UpdateConsumer(ctx, cfg)
	if err == nil {
		b.pauseStep(ctx, pauseStepRecorded)
		cons, err = b.matchPause(ctx, cons)
	}
	var info *jetstream.ConsumerInfo
	if err == nil {
		b.pauseStep(ctx, pauseStepMatched)
		info, err = cons.Info(ctx)
	}
	if err != nil {
		return nil, false, fmt.Errorf("bus: consumer %s: %w", name, err)
	}
	held := sameRecord(info.Config, cfg) && PausedNow(info.Config) == (RecordedPause(cfg) != nil)
	return info, held, nil
}

// sameRecord reports whether a and b hold the same pause record.
func sameRecord(a, b jetstream.ConsumerConfig) bool {
	for _, k := range []string{PoolPausedByKey, PoolPausedAtKey, PoolPausedReasonKey} {
		if a.Metadata[k] != b.Metadata[k] { // a key missing is one empty
			return false
		}
	}
	return true
}

// The steps of a pause or resume after which a test may change the
// consumer (Bus.pauseHook, export_test.go), as another replica's
// EnsurePool would.
const (
	pauseStepRecorded = "recorded" // the record is written, the pause not yet matched
	pauseStepMatched  = "matched"  // the pause is matched, not read back yet
)

// pauseStep runs the test hook, if any, after step of a pause or resume.
func (b *Bus) pauseStep(ctx context.Context, step string) {
	if b.pauseHook != nil {
		b.pauseHook(ctx, step)
	}
}
