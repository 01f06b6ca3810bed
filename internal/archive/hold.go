package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// hold keeps st's MaxAge above the age of its oldest unarchived message
// plus HoldAhead (raised when that comes within HoldAhead/2 of the
// window, never lowered while behind, back to the window once every
// message older than the window is archived), marks the hold until
// HoldAhead from now on every pass while it is needed, and records the
// stream's Progress.
func (a *Archiver) hold(ctx context.Context, stream jetstream.Stream, st *streamState) error {
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("archive: stream %s: %w", st.name, err)
	}
	now := time.Now()
	p := Progress{Stream: st.name, Window: st.window, Archiver: a.cfg.Name, UpdatedAt: now.UTC()}
	p.ToSeq, p.Segments = a.archived(ctx, st)
	if info.State.LastSeq > p.ToSeq && info.State.Msgs > 0 {
		oldest, err := a.oldestUnarchived(ctx, stream, p.ToSeq+1, info.State)
		if err != nil {
			return err
		}
		p.Oldest = oldest
	}
	cur := info.Config.MaxAge
	mark, marked := info.Config.Metadata[bus.ArchiveHoldMetadata]
	lag := p.Lag(now)
	want, until := st.window, time.Time{}
	if lag > 0 && lag+a.cfg.HoldAhead/2 > st.window {
		// Never below what the stream keeps now (0 = for ever): a MaxAge
		// is lowered only once everything older than the window is
		// archived.
		want, until = raised(cur, max(st.window, lag+a.cfg.HoldAhead)), now.Add(a.cfg.HoldAhead)
	}
	switch {
	case want != st.window:
		// Every pass while held: the mark's time moves on with the
		// hold, so it never lapses while the hold is needed.
		if !holdStands(mark, now) || (cur != 0 && cur < lag+a.cfg.HoldAhead/2) {
			a.log.WarnContext(ctx, "the archive is behind: the stream's MaxAge is held over its oldest unarchived message",
				"stream", st.name, "lag", lag.Round(time.Second), "window", st.window, "max_age", want)
		}
		err = a.setMaxAge(ctx, info.Config, want, until)
	case cur != st.window || marked:
		// Everything older than the window is archived (or the stream is
		// empty): the window is the stream's MaxAge again.
		err = a.setMaxAge(ctx, info.Config, st.window, time.Time{})
		a.log.InfoContext(ctx, "the archive is past the window: the stream's MaxAge is its window", "stream", st.name, "window", st.window, "was", cur)
	}
	if err != nil {
		return err
	}
	if want != st.window {
		p.HeldMaxAge = want
	}
	return a.record(ctx, p)
}

// holdStands reports whether a hold mark (bus.ArchiveHoldMetadata) stands
// at now: an expired or unreadable one does not.
func holdStands(mark string, now time.Time) bool {
	until, err := time.Parse(time.RFC3339, mark)
	return err == nil && now.Before(until)
}

// raised is the larger of two MaxAges, 0 being for ever.
func raised(cur, want time.Duration) time.Duration {
	if cur == 0 {
		return 0
	}
	return max(cur, want)
}

// oldestUnarchived is when the stream stored its first message at or
// after from.
func (a *Archiver) oldestUnarchived(ctx context.Context, stream jetstream.Stream, from uint64, state jetstream.StreamState) (time.Time, error) {
	rd, err := newStreamReader(ctx, stream, a.cfg.Bus.Config.Prefix, max(from, state.FirstSeq), state.LastSeq)
	if err != nil {
		return time.Time{}, err
	}
	defer rd.close()
	m, err := rd.next(ctx)
	if err != nil || m == nil {
		return time.Time{}, err
	}
	return m.Time, nil
}

// setMaxAge updates the stream's MaxAge, marking a hold until until
// (bus.ArchiveHoldMetadata, which the bus keeps when it updates the
// stream at a dispatcher's start) or removing the mark (zero until).
func (a *Archiver) setMaxAge(ctx context.Context, cfg jetstream.StreamConfig, maxAge time.Duration, until time.Time) error {
	cfg.MaxAge = maxAge
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	delete(cfg.Metadata, bus.ArchiveHoldMetadata)
	if !until.IsZero() {
		cfg.Metadata[bus.ArchiveHoldMetadata] = until.UTC().Format(time.RFC3339)
	}
	if _, err := a.cfg.Bus.JS.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("archive: hold %s: %w", cfg.Name, err)
	}
	return nil
}

// record stores p in the archive bucket and in memory.
func (a *Archiver) record(ctx context.Context, p Progress) error {
	a.mu.Lock()
	a.progress[p.Stream] = p
	a.mu.Unlock()
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("archive: progress: %w", err)
	}
	if _, err := a.kv.Put(ctx, ProgressKey(p.Stream), b); err != nil {
		return fmt.Errorf("archive: progress of %s: %w", p.Stream, err)
	}
	return nil
}
