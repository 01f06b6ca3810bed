package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
)

// callMsg is one calls-stream message, read live or from the archive.
type callMsg struct {
	subject, msgID string
	data           []byte
	seq            uint64
	stored         time.Time
}

// scanner is one Run's read of the calls: the archived part of the range
// (the sequences before the live stream's first), then the live stream,
// as one sequence of messages.
type scanner struct {
	s    *Source
	f    Filter
	o    Options
	sum  *Summary
	next func(*job) error
	// filters are the subjects read (the consumer's filter, applied to
	// archived messages too); narrowed when they leave subjects out (so
	// sequences are not contiguous).
	filters  []string
	narrowed bool
	// last is the live stream's last sequence when the run started: the
	// scan ends there.
	last uint64
	// prev is the last sequence read (gaps are found against it);
	// covered the sequence up to which every message has been read,
	// from the archive or live.
	prev, covered uint64
	lastProgress  time.Time
}

// scan reads CALLS and hands one job per call (in order) to next. With an
// archive it reads the archived calls before the live stream's first
// sequence first, and, whenever the live stream has dropped messages the
// scan has not read yet (they aged out meanwhile), those from the archive
// before going on.
func (s *Source) scan(ctx context.Context, f Filter, o Options, sum *Summary, next func(*job) error) error {
	info, err := s.calls.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: calls stream: %w", err)
	}
	sc := &scanner{s: s, f: f, o: o, sum: sum, next: next, last: info.State.LastSeq, lastProgress: time.Now()}
	// Unfiltered, read the replays' shadow subjects too (they share the
	// stream), so that sequences are contiguous and a gap means deleted
	// messages; shadow messages are then skipped, not audited.
	sc.filters = []string{s.subj.AllCalls(), s.subj.AllShadow()}
	if sc.narrowed = f.Tenant != "" || f.Tool != ""; sc.narrowed {
		sc.filters = []string{s.subj.CallsOf(f.Tenant, f.Tool)}
	}
	defer func() {
		if o.Progress != nil {
			o.Progress(sum.Scanned)
		}
	}()
	if info.State.FirstSeq > 1 {
		done, err := sc.archived(ctx, info.State.FirstSeq-1)
		if err != nil || done {
			return err
		}
	}
	if sc.last == 0 || info.State.Msgs == 0 || sc.covered >= sc.last {
		if !sc.narrowed && sc.prev != 0 {
			// Archived calls past Until are not visited: covered is how
			// far the archive's part reaches.
			endGap(sum, "CALLS", max(sc.prev, sc.covered), sc.last)
		}
		return nil
	}
	return sc.live(ctx)
}

// endGap reports the sequences after read up to last (a stream's last
// when the run started) as a gap, when the run read up to read (from the
// archive) and nothing after it is left to read (the live stream is
// empty): a lost last segment, with the stream dropped past it, has no
// later message to be found missing before. The lost messages' times are
// unknown, so it is reported whatever the run's Until. Zero read means
// the run knows of no sequence read (nothing archived, or nothing since
// Since): nothing is reported.
func endGap(sum *Summary, stream string, read, last uint64) {
	if read != 0 && read < last {
		sum.addAnomaly(Anomaly{Kind: "gap", Seq: read + 1,
			Detail: fmt.Sprintf("%s sequences %d-%d are missing (deleted messages, or dropped unarchived)", stream, read+1, last)})
	}
}

// archived reads the archived calls after covered up to sequence to (as
// far as the archive holds them) and reports whether the scan is done.
// Without an archive it does nothing.
func (sc *scanner) archived(ctx context.Context, to uint64) (bool, error) {
	if sc.s.arch == nil {
		return false, nil
	}
	covered, done, err := sc.s.eachArchived(ctx, sc.s.calls.CachedInfo().Config.Name, sc.covered, to, sc.f,
		func(m *archive.Message) (bool, error) {
			if !sc.selected(m.Subject) {
				return false, nil
			}
			return sc.visit(callMsg{subject: m.Subject, msgID: m.Header.Get(jetstream.MsgIDHeader), data: m.Data, seq: m.Seq, stored: m.Time})
		})
	sc.covered = covered
	return done, err
}

// selected reports whether a message on subject is one the scan reads.
func (sc *scanner) selected(subject string) bool {
	for _, f := range sc.filters {
		if bus.SubjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// live reads the live stream after what the archive gave, up to last.
func (sc *scanner) live(ctx context.Context) error {
	l := &liveRead{stream: sc.s.calls, what: "calls", filters: sc.filters, since: sc.f.Since, covered: &sc.covered, until: sc.last,
		visit: func(_ context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
			return sc.visit(callMsg{subject: msg.Subject(), msgID: msg.Headers().Get(jetstream.MsgIDHeader), data: msg.Data(),
				seq: md.Sequence.Stream, stored: md.Timestamp})
		}}
	if sc.s.arch != nil {
		l.archived = sc.archived
	}
	return l.run(ctx)
}

// visit handles one message, archived or live, and reports whether the
// scan is done (at the snapshot's end or past Until).
func (sc *scanner) visit(m callMsg) (bool, error) {
	f, sum := sc.f, sc.sum
	if m.seq <= sc.covered {
		return false, nil // read already, from the archive
	}
	if m.seq > sc.last || (!f.Until.IsZero() && m.stored.After(f.Until)) {
		return true, nil
	}
	sc.covered = m.seq
	sum.Scanned++
	if sum.FirstSeq == 0 {
		sum.FirstSeq = m.seq
	}
	sum.LastSeq = m.seq
	if !sc.narrowed && sc.prev != 0 && m.seq != sc.prev+1 {
		sum.addAnomaly(Anomaly{Kind: "gap", Seq: sc.prev + 1,
			Detail: fmt.Sprintf("CALLS sequences %d-%d are missing (deleted messages, or dropped unarchived)", sc.prev+1, m.seq-1)})
	}
	sc.prev = m.seq
	if sc.o.Progress != nil && time.Since(sc.lastProgress) > 200*time.Millisecond {
		sc.o.Progress(sum.Scanned)
		sc.lastProgress = time.Now()
	}
	done := m.seq == sc.last
	j, skip := sc.s.jobOf(m, f, sum)
	if skip {
		return done, nil
	}
	return done, sc.next(j)
}
