package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/startstop"
)

// Archiver is the dispatcher's archiving service: while its replica holds
// the archive lease it seals each closed period of the calls, results and
// events streams as a segment (Writer) and keeps each stream's MaxAge
// above the age of its oldest unarchived message (hold). A
// startstop.Service.
type Archiver struct {
	cfg     Config
	log     *slog.Logger
	streams []*streamState
	loop    *startstop.Loop
	kv      jetstream.KeyValue
	lease   *lease
	term    uint64 // the lease's term the writers were opened in (the loop's)
	local   bool   // the store is a local directory
	warned  bool   // warnShared has warned (the loop's)

	mu       sync.Mutex
	progress map[string]Progress
	passes   chan struct{} // closed and replaced after each pass (tests, Passed)
}

// streamState is one archived stream: its writer (nil until the lease is
// held; dropped when it is lost, so a new holder reads the chain again)
// and its window.
type streamState struct {
	name   string
	window time.Duration
	w      *Writer
}

// Progress is what the archiver has done for one stream, recorded in the
// archive bucket (key progress.<stream>) after each pass of the active
// archiver, so that any replica can read it (ReadProgress).
type Progress struct {
	Stream string `json:"stream"`
	// ToSeq is the last stream sequence archived (0 = none); Segments the
	// chain's length.
	ToSeq    uint64 `json:"to_seq"`
	Segments uint64 `json:"segments"`
	// Oldest is when the stream stored its oldest unarchived message;
	// zero when every message is archived.
	Oldest time.Time `json:"oldest_unarchived,omitzero"`
	// Window is the stream's configured MaxAge; HeldMaxAge the MaxAge the
	// archiver set above it to keep unarchived messages (0 = none).
	Window     time.Duration `json:"window"`
	HeldMaxAge time.Duration `json:"held_max_age,omitempty"`
	Archiver   string        `json:"archiver"`
	UpdatedAt  time.Time     `json:"updated_at"`
}

// Lag is how old the oldest unarchived message is at now (0 when none).
func (p Progress) Lag(now time.Time) time.Duration {
	if p.Oldest.IsZero() {
		return 0
	}
	return now.Sub(p.Oldest)
}

// New returns an archiver of cfg (its defaults filled in); Start refuses
// a configuration that does not Validate.
func New(cfg Config) *Archiver {
	cfg = cfg.WithDefaults()
	a := &Archiver{cfg: cfg, log: cfg.Logger.With("component", "archiver"), progress: map[string]Progress{}, passes: make(chan struct{})}
	if cfg.Bus != nil {
		c := cfg.Bus.Config
		a.streams = []*streamState{{name: c.CallsStream(), window: c.CallsWindow()},
			{name: c.ResultsStream(), window: c.ResultsWindow()}, {name: c.EventsStream(), window: c.EventsWindow()}}
	}
	a.loop = startstop.NewLoop(a.run)
	return a
}

// Bucket is the name of the KV bucket of an installation's archivers: the
// lease and each stream's Progress.
func Bucket(prefix string) string { return bus.Config{Prefix: prefix}.ArchiveBucket() }

// Start makes the archive bucket when missing and starts the loop.
func (a *Archiver) Start(ctx context.Context) error {
	if err := a.cfg.Validate(); err != nil {
		return err
	}
	kv, err := a.cfg.Bus.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket(a.cfg.Bus.Config.Prefix), Description: "toolwire archiver: lease and progress",
		History: 1, MaxValueSize: 4096, Storage: jetstream.FileStorage, Replicas: a.cfg.Bus.Config.Replicas,
	})
	if err != nil {
		return fmt.Errorf("archive: bucket: %w", err)
	}
	a.kv = kv
	a.lease = &lease{kv: kv, name: a.cfg.Name, ttl: a.cfg.LeaseTTL}
	if w := a.cfg.shortestWindow(); a.cfg.HoldAhead > w/2 {
		a.log.WarnContext(ctx, "HoldAhead is above half the retention window: the streams are held for good, and the window never applies",
			"hold_ahead", a.cfg.HoldAhead, "window", w)
	}
	if perm, ok := localDir(a.cfg.Store); ok {
		a.local = true
		a.log.InfoContext(ctx, "the archive is a local directory: fit for one dispatcher replica (and tests); replicas need one shared store that creates an object only if absent, atomically (S3)")
		if perm&0o077 != 0 {
			a.log.WarnContext(ctx, "the archive directory is open to others: it holds what the streams hold, secret arguments included (chmod 700)",
				"mode", perm.String())
		}
	}
	return a.loop.Start(ctx)
}

// Stop ends the loop (a segment being written is dropped, never half
// sealed) and gives the lease up.
func (a *Archiver) Stop(ctx context.Context) error { return a.loop.Stop(ctx) }

// Passed returns a channel closed when the pass running (or the next one)
// has ended: tests wait on it.
func (a *Archiver) Passed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.passes
}

// Progress returns what this replica's archiver last did for each stream
// (empty on a replica that has not led).
func (a *Archiver) Progress() map[string]Progress {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]Progress, len(a.progress))
	for k, v := range a.progress {
		out[k] = v
	}
	return out
}

// run is the archiver's loop: the lease is taken at once and renewed by
// a goroutine of its own (every quarter of LeaseTTL, at most Every), and
// a pass runs every Every. Stopping ends the renewals, then gives the
// lease up.
func (a *Archiver) run(ctx context.Context) {
	if _, err := a.lease.hold(ctx); err != nil && ctx.Err() == nil {
		a.log.WarnContext(ctx, "archive lease not taken", "err", err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		a.lease.renew(rctx, min(a.cfg.Every, a.cfg.LeaseTTL/4), func(ctx context.Context, err error) {
			a.log.WarnContext(ctx, "archive lease not renewed", "err", err)
		})
	})
	defer func() {
		stop()
		wg.Wait()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		a.lease.release(rctx)
	}()
	t := time.NewTicker(a.cfg.Every)
	defer t.Stop()
	for {
		a.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass, while this replica holds the lease, archives every stream in
// turn: each is sealed for at most Every (the next pass goes on where
// this one stopped) and then held, so every stream is held every pass
// however far behind one of them is.
func (a *Archiver) pass(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		close(a.passes)
		a.passes = make(chan struct{})
		a.mu.Unlock()
	}()
	held, term := a.lease.heldTerm()
	if !held || term != a.term {
		for _, st := range a.streams {
			st.w = nil // another replica may have extended the chains meanwhile
		}
		a.term = term
	}
	if !held {
		a.warnShared(ctx)
		return
	}
	for _, st := range a.streams {
		if ctx.Err() != nil || !a.lease.held() {
			return
		}
		if err := a.archiveStream(ctx, st); err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "archiving failed; retried next pass", "stream", st.name, "err", err)
			st.w = nil
		}
	}
}

// warnShared warns, once, when another replica archives while this one's
// archive store is a local directory: each replica would keep a chain of
// its own, and a directory's create-if-absent is not atomic across
// processes.
func (a *Archiver) warnShared(ctx context.Context) {
	if other := a.lease.otherHolder(); a.local && !a.warned && other != "" {
		a.warned = true
		a.log.WarnContext(ctx, "another dispatcher replica archives, and this one's archive is a local directory: replicas must share one store (S3); a directory suits a single replica",
			"other", other)
	}
}

// archiveStream seals every closed period of st not archived yet, then
// holds the stream's MaxAge over its oldest unarchived message and
// records the progress. It holds also when sealing failed (an archive
// store that is down is when a hold is needed most), counting as
// archived what the chain's head last known says.
func (a *Archiver) archiveStream(ctx context.Context, st *streamState) error {
	stream, err := a.cfg.Bus.JS.Stream(ctx, st.name)
	if err != nil {
		return fmt.Errorf("archive: stream %s: %w", st.name, err)
	}
	serr := a.seal(ctx, stream, st)
	return errors.Join(serr, a.hold(ctx, stream, st))
}

// seal seals the closed periods of st not archived yet, for at most
// Every (and at least one segment).
func (a *Archiver) seal(ctx context.Context, stream jetstream.Stream, st *streamState) error {
	if st.w == nil {
		w, err := OpenWriter(ctx, a.cfg.Store, st.name, a.cfg.Bus.Signer, a.cfg.Name)
		if err != nil {
			return err
		}
		st.w = w
	}
	budget := time.Now().Add(a.cfg.Every)
	for a.lease.held() && time.Now().Before(budget) {
		sealed, err := a.sealNext(ctx, stream, st)
		if errors.Is(err, ErrRaced) {
			st.w = nil
			return nil
		}
		if err != nil {
			return err
		}
		if !sealed {
			break
		}
	}
	return nil
}

// archived is what of st is archived as far as this replica knows: its
// writer's head, or without one (the store could not be read) the
// progress last recorded in the archive bucket or in memory; zero when
// none is known, so that every message counts as unarchived.
func (a *Archiver) archived(ctx context.Context, st *streamState) (toSeq, segments uint64) {
	if st.w != nil {
		head := st.w.Head()
		if head.Manifest != "" {
			segments = head.Index + 1
		}
		return head.ToSeq, segments
	}
	if p, err := ReadProgress(ctx, a.kv, st.name); err == nil {
		if q, ok := p[st.name]; ok {
			return q.ToSeq, q.Segments
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.progress[st.name]
	return q.ToSeq, q.Segments
}

// sealNext seals the next segment of st when the period of its oldest
// unarchived message is closed; it reports whether it sealed one.
func (a *Archiver) sealNext(ctx context.Context, stream jetstream.Stream, st *streamState) (bool, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("archive: stream %s: %w", st.name, err)
	}
	head := st.w.Head()
	if info.State.LastSeq <= head.ToSeq {
		return false, nil
	}
	start, dropped := head.ToSeq+1, uint64(0)
	if info.State.FirstSeq > start {
		dropped = min(info.State.FirstSeq, info.State.LastSeq+1) - start
		start = info.State.FirstSeq
	}
	rd, err := newStreamReader(ctx, stream, a.cfg.Bus.Config.Prefix, start, info.State.LastSeq)
	if err != nil {
		return false, err
	}
	defer rd.close()
	first, err := rd.next(ctx)
	if err != nil || first == nil {
		return false, err
	}
	if first.Seq > start {
		// The stream may have dropped more between its Info and the read:
		// what is now below its first sequence was dropped, not deleted.
		now, err := stream.Info(ctx)
		if err != nil {
			return false, fmt.Errorf("archive: stream %s: %w", st.name, err)
		}
		if cut := min(now.State.FirstSeq, first.Seq); cut > start {
			dropped += cut - start
			start = cut
		}
	}
	pstart := first.Time.Truncate(a.cfg.Segment)
	pend := pstart.Add(a.cfg.Segment)
	if time.Now().Before(pend.Add(a.cfg.Settle)) {
		return false, nil // the period is still open
	}
	seg, err := st.w.Begin(ctx, pstart, pend)
	if err != nil {
		return false, err
	}
	toSeq, err := a.fill(ctx, seg, rd, first)
	if err != nil {
		seg.Abort()
		return false, err
	}
	if !a.lease.held() {
		seg.Abort()
		return false, nil
	}
	m, err := st.w.Seal(ctx, seg, toSeq, dropped)
	if err != nil {
		return false, err
	}
	if dropped > 0 {
		a.log.ErrorContext(ctx, "messages were dropped by the stream before they were archived: its byte limit is too small for the window (internal/archive, \"How JetStream drops only what is archived\")",
			"stream", st.name, "count", dropped, "before", start)
	}
	a.log.DebugContext(ctx, "segment sealed", "stream", st.name, "index", m.Index, "to_seq", m.ToSeq, "messages", m.Messages)
	return true, nil
}

// fill adds first and the messages after it stored before the end of
// seg's period to seg, up to the segment's limits; it returns the last
// sequence seg covers.
func (a *Archiver) fill(ctx context.Context, seg *Segment, rd *streamReader, first *Message) (uint64, error) {
	end := seg.m.PeriodEnd
	m := first
	for {
		if err := seg.Add(m); err != nil {
			return 0, err
		}
		last := m.Seq
		next, err := rd.next(ctx)
		if err != nil {
			return 0, err
		}
		if next == nil {
			return max(last, rd.last), nil // read to the stream's end when the pass looked
		}
		if !next.Time.Before(end) || seg.Len() >= a.cfg.MaxSegmentMessages || seg.Bytes() >= a.cfg.MaxSegmentBytes {
			return next.Seq - 1, nil
		}
		m = next
	}
}

// ProgressKey is the archive bucket's key of stream's Progress.
func ProgressKey(stream string) string { return "progress." + stream }

// ReadProgress reads each stream's Progress from the archive bucket of
// kv (Bucket); streams never archived are absent.
func ReadProgress(ctx context.Context, kv jetstream.KeyValue, streams ...string) (map[string]Progress, error) {
	out := map[string]Progress{}
	for _, s := range streams {
		e, err := kv.Get(ctx, ProgressKey(s))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("archive: progress of %s: %w", s, err)
		}
		var p Progress
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("archive: progress of %s: %w", s, err)
		}
		out[s] = p
	}
	return out, nil
}

// OldestUnarchived is when stream stored its first message after
// sequence archived (a Progress's ToSeq), read from the stream itself, so
// that an archiver that stopped recording its progress shows a lag that
// grows; zero when the stream holds nothing past archived. state is the
// stream's, read just before. Every reader of the lag (a dispatcher's
// toolwire_archive_lag_seconds and admission, toolctl store status) reads
// it so.
func OldestUnarchived(ctx context.Context, stream jetstream.Stream, state jetstream.StreamState, archived uint64) (time.Time, error) {
	if state.Msgs == 0 || state.LastSeq <= archived {
		return time.Time{}, nil
	}
	m, err := stream.GetMsg(ctx, max(archived+1, state.FirstSeq), jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil // dropped meanwhile
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("archive: oldest unarchived message of %s: %w", stream.CachedInfo().Config.Name, err)
	}
	return m.Time, nil
}
