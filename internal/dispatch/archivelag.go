package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// archiveLagEvery is how often a dispatcher with an archive store reads
// how far behind the archive is.
const archiveLagEvery = 2 * time.Second

// archiveBehindRetryAfter is the retry_after of a call refused because
// the archive is behind: an archiver seals a period per pass (30s).
const archiveBehindRetryAfter = 30 * time.Second

// archiveBehindWarnEvery bounds the WARN lines of those refusals: one a
// period, with the count refused since the last.
const archiveBehindWarnEvery = time.Minute

// archiveLagUnknownAfter is how many reads in a row may fail before a
// stream's lag counts as unknown: its last value is forgotten (no longer
// exported, no longer refusing) rather than kept stale.
const archiveLagUnknownAfter = 3

// archiveLag is a dispatcher's view of how far behind the archive is
// (only with an archive store): for each archived stream (calls, results,
// events), when the stream stored its oldest message not yet archived —
// the first one after the last sequence the active archiver recorded
// (archive.ReadProgress), read from the stream itself, so that an
// archiver that stopped (its progress no longer recorded) shows a lag
// that grows — and the stream's live MaxAge and hold mark. Read every
// archiveLagEvery; exported as toolwire_archive_lag_seconds{stream};
// admission refuses new calls while a stream would drop an unarchived
// message soon (refusal).
type archiveLag struct {
	d       *Dispatcher
	streams []lagStream
	margin  time.Duration
	kv      jetstream.KeyValue // the archive bucket; nil until it exists

	mu     sync.Mutex
	state  map[string]lagState // by stream; absent before the first read and while unknown
	failed map[string]int      // reads failed in a row, by stream

	refused  atomic.Int64 // refusals since the last WARN
	lastWarn atomic.Int64 // unix nanoseconds of the last WARN
}

// lagStream is one archived stream: its handle and its window (the
// MaxAge it keeps once archived: bus.Config's CallsWindow,
// ResultsWindow, EventsWindow).
type lagStream struct {
	name   string
	stream jetstream.Stream
	window time.Duration
}

// lagState is what the last read of a stream found.
type lagState struct {
	oldest time.Time     // its oldest unarchived message; zero when caught up
	maxAge time.Duration // its live MaxAge (0 = for ever), a hold included
	// measured: the live MaxAge is the window or a hold the archiver
	// placed (bus.ArchiveHoldMetadata, standing or not). A longer MaxAge
	// with no mark is the one kept from before the archive was turned on
	// (or the window shortened): the stream drops what it dropped before
	// until the archiver holds or lowers it, and admission does not
	// measure against it.
	measured bool
	// full: a stream that drops its oldest messages at its byte limit
	// (results, events) holds StoreHighWater of it or more and its
	// oldest message is not archived, so its next writes would drop what
	// no archive holds, however young (measured streams only, as above).
	full *storeFill
}

// storeFill is a full stream's bytes and byte limit.
type storeFill struct{ bytes, maxBytes uint64 }

// bound is the lag past which st would soon drop an unarchived message:
// its live MaxAge less margin; 0 when nothing is measured.
func (st lagState) bound(margin time.Duration) time.Duration {
	if !st.measured || st.maxAge == 0 {
		return 0
	}
	return max(st.maxAge-margin, time.Nanosecond)
}

// archiveLagMargin is how close to a stream's live MaxAge its oldest
// unarchived message may come before admission refuses: a quarter of
// the archiver's HoldAhead (1.5h by default; a sixteenth of the shortest
// window when that is under 24h). An archiver that holds keeps the
// oldest unarchived message at least HoldAhead/2 younger than the MaxAge
// (internal/archive, hold), so a working hold is never refused: only a
// hold that is no longer renewed (no archiver leads, or it cannot update
// the stream) or a stream with no hold comes within the margin.
func archiveLagMargin(b *bus.Bus) time.Duration {
	return archive.Config{Bus: b}.WithDefaults().HoldAhead / 4
}

func newArchiveLag(d *Dispatcher) *archiveLag {
	c := d.bus.Config
	return &archiveLag{d: d, margin: archiveLagMargin(d.bus), streams: []lagStream{
		{name: c.CallsStream(), stream: d.bus.Calls, window: c.CallsWindow()},
		{name: c.ResultsStream(), stream: d.bus.Results, window: c.ResultsWindow()},
		{name: c.EventsStream(), stream: d.bus.Events, window: c.EventsWindow()},
	}}
}

// service reads the lag at its start and every archiveLagEvery after.
func (l *archiveLag) service() startstop.Service {
	return startstop.NewLoop(func(ctx context.Context) {
		t := time.NewTicker(archiveLagEvery)
		defer t.Stop()
		for {
			l.read(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// read reads every stream's oldest unarchived message and live MaxAge. A
// stream that cannot be read keeps what was last read for
// archiveLagUnknownAfter reads in a row; then its lag is unknown: not
// exported, and admission does not refuse on it (fail-open: a lag that
// cannot be read is JetStream trouble, which admission meets elsewhere;
// refusing every call on a stale value would turn a passing read error
// into an outage). It is logged at ERROR when it becomes unknown.
func (l *archiveLag) read(ctx context.Context) {
	progress, err := l.progress(ctx)
	if err != nil {
		for _, s := range l.streams {
			l.failedRead(ctx, s.name, err)
		}
		return
	}
	for _, s := range l.streams {
		st, err := l.readStream(ctx, s, progress[s.name].ToSeq)
		if err != nil {
			l.failedRead(ctx, s.name, err)
			continue
		}
		l.mu.Lock()
		if l.state == nil {
			l.state, l.failed = map[string]lagState{}, map[string]int{}
		}
		l.state[s.name] = st
		delete(l.failed, s.name)
		l.mu.Unlock()
	}
}

// failedRead counts a failed read of stream and forgets its state after
// archiveLagUnknownAfter in a row.
func (l *archiveLag) failedRead(ctx context.Context, stream string, err error) {
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	if l.failed == nil {
		l.state, l.failed = map[string]lagState{}, map[string]int{}
	}
	l.failed[stream]++
	n := l.failed[stream]
	if n >= archiveLagUnknownAfter {
		delete(l.state, stream)
	}
	l.mu.Unlock()
	switch {
	case n == archiveLagUnknownAfter:
		l.d.log.ErrorContext(ctx, "the archive's lag is unknown: not exported, and new calls are not refused on it until it is read again",
			"stream", stream, "failed_reads", n, "err", err)
	case n < archiveLagUnknownAfter:
		l.d.log.WarnContext(ctx, "archive lag not read", "stream", stream, "err", err)
	}
}

// progress is each stream's archive.Progress; none before an archiver
// made the archive bucket.
func (l *archiveLag) progress(ctx context.Context) (map[string]archive.Progress, error) {
	if l.kv == nil {
		kv, err := l.d.bus.JS.KeyValue(ctx, archive.Bucket(l.d.bus.Config.Prefix))
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("dispatch: archive bucket: %w", err)
		}
		l.kv = kv
	}
	names := make([]string, len(l.streams))
	for i, s := range l.streams {
		names[i] = s.name
	}
	return archive.ReadProgress(ctx, l.kv, names...)
}

// readStream reads s's live MaxAge and hold mark and when it stored its
// first message after sequence archived (zero when there is none).
func (l *archiveLag) readStream(ctx context.Context, s lagStream, archived uint64) (lagState, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return lagState{}, fmt.Errorf("dispatch: stream %s: %w", s.name, err)
	}
	_, marked := info.Config.Metadata[bus.ArchiveHoldMetadata]
	st := lagState{maxAge: info.Config.MaxAge, measured: marked || (info.Config.MaxAge != 0 && info.Config.MaxAge <= s.window)}
	if st.oldest, err = archive.OldestUnarchived(ctx, s.stream, info.State, archived); err != nil {
		return lagState{}, fmt.Errorf("dispatch: %w", err)
	}
	if c, n := info.Config, info.State; st.measured && c.Discard == jetstream.DiscardOld && c.MaxBytes > 0 && n.Msgs > 0 &&
		archived < n.FirstSeq && float64(n.Bytes) >= l.d.cfg.StoreHighWater*float64(c.MaxBytes) {
		st.full = &storeFill{bytes: n.Bytes, maxBytes: uint64(c.MaxBytes)}
	}
	return st, nil
}

// lags is each stream's lag at now: the age of its oldest unarchived
// message, 0 when caught up (toolwire_archive_lag_seconds).
func (l *archiveLag) lags() map[string]time.Duration {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Duration, len(l.state))
	for name, st := range l.state {
		out[name] = lagAt(st.oldest, now)
	}
	return out
}

func lagAt(oldest, now time.Time) time.Duration {
	if oldest.IsZero() {
		return 0
	}
	return max(now.Sub(oldest), 0)
}

// refusal is the OVERLOADED answer to a new call while a stream's lag is
// past its bound (lagState.bound: its oldest unarchived message is
// within the margin of the stream's live MaxAge, so that JetStream would
// soon drop it) or the stream is full with its oldest message unarchived
// (lagState.full: its byte limit would drop it), its cause and target
// (the stream); nil when none is,
// before the first read and while a stream's lag is unknown. Refusals are logged at
// WARN once per archiveBehindWarnEvery, with their count.
func (l *archiveLag) refusal(ctx context.Context) (te *toolwirev1.ToolError, cause, target string) {
	if l == nil {
		return nil, "", ""
	}
	now := time.Now()
	l.mu.Lock()
	var behind *lagStream
	var lag, bound time.Duration
	var full *storeFill
	for i, s := range l.streams {
		st := l.state[s.name]
		if lag, bound, full = lagAt(st.oldest, now), st.bound(l.margin), st.full; full != nil || (bound > 0 && lag > bound) {
			behind = &l.streams[i]
			break
		}
	}
	l.mu.Unlock()
	if behind == nil {
		return nil, "", ""
	}
	why := fmt.Sprintf("stream %s's oldest unarchived message is %s old, within %s of the stream's MaxAge", behind.name, lag.Round(time.Second), l.margin)
	if full != nil {
		why = fmt.Sprintf("stream %s holds %.0f%% of its %s byte limit and its oldest message is not archived", behind.name,
			100*float64(full.bytes)/float64(full.maxBytes), bus.FormatBytes(int64(full.maxBytes)))
	}
	te = envelope.Overloaded("the archive is behind: "+why+", and the stream would drop what no archive holds: new calls are refused until it is archived or held",
		archiveBehindRetryAfter)
	te.Suggestion = "retry after retry_after; the archive store or the archiver needs attention (toolwire_archive_lag_seconds, docs/reliability.md)"
	l.warn(ctx, behind, why, lag)
	return te, telemetry.OverloadArchiveBehind, behind.name
}

// warn logs the refusals at WARN at most once per archiveBehindWarnEvery,
// with why the stream is behind.
func (l *archiveLag) warn(ctx context.Context, s *lagStream, why string, lag time.Duration) {
	now := time.Now()
	n := l.refused.Add(1)
	last := l.lastWarn.Load()
	if now.UnixNano()-last < int64(archiveBehindWarnEvery) || !l.lastWarn.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	l.refused.Add(-n)
	l.d.log.LogAttrs(ctx, slog.LevelWarn, "new calls are refused: the archive is behind and the stream would drop unarchived messages",
		slog.String("stream", s.name), slog.String("why", why), slog.Duration("lag", lag.Round(time.Second)), slog.Duration("window", s.window), slog.Int64("refused", n))
}
