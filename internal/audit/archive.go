package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"gocloud.dev/blob"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// UseArchive makes the Source read the archive store (internal/archive)
// as the part of the record the live streams no longer hold: calls
// before the calls stream's first sequence, and results and events
// before their streams' first. The caller closes store.
func (s *Source) UseArchive(store *blob.Bucket) {
	s.arch = &archived{store: store, r: archive.NewReader(store), cache: map[string][]*loadedSegment{}, firsts: map[string]*oldest{},
		holds: map[string]map[uint64]*segmentCalls{}}
}

// archived is a Source's archive: its reader and the segments of results
// and events loaded last, indexed by call id.
type archived struct {
	store *blob.Bucket
	r     *archive.Reader

	mu sync.Mutex
	// cache holds, per stream, the segments loaded last (at most
	// cachedSegments, most recent last).
	cache map[string][]*loadedSegment
	// firsts caches each live stream's first message time.
	firsts map[string]*oldest
	// holds remembers, per stream and segment index, which calls a
	// segment loaded once holds messages of, so that a call's lookup
	// skips the segments that hold none of its messages instead of
	// loading them again: a run over archived calls loads each segment
	// about once. Only call ids are kept, and only of segments that end
	// less than holdsKept before the latest lookup's start.
	holds map[string]map[uint64]*segmentCalls
	// loads counts the segments loaded (Summary.ArchiveSegmentsRead).
	loads atomic.Int64
}

// segmentCalls is the call ids one segment holds messages of.
type segmentCalls struct {
	last time.Time // the segment's last message's time
	ids  map[string]struct{}
}

// holdsKept is how far before a lookup's start the call ids of segments
// are kept: calls are looked up in CALLS order, by parallel workers, so
// one a little older than the latest may still come.
const holdsKept = time.Hour

// lacks reports whether m, a segment of stream loaded before, holds no
// message of callID; false when that is not known.
func (a *archived) lacks(stream string, m *archive.Manifest, callID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	sc := a.holds[stream][m.Index]
	if sc == nil {
		return false
	}
	_, ok := sc.ids[callID]
	return !ok
}

// remember records which calls seg (manifest m of stream) holds, and
// forgets those of segments that ended holdsKept before since.
func (a *archived) remember(stream string, m *archive.Manifest, seg *loadedSegment, since time.Time) {
	a.mu.Lock()
	known := a.holds[stream][m.Index] != nil
	a.mu.Unlock()
	if known {
		return
	}
	ids := make(map[string]struct{}, len(seg.byCall))
	for id := range seg.byCall {
		ids[id] = struct{}{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.holds[stream]
	if h == nil {
		h = map[uint64]*segmentCalls{}
		a.holds[stream] = h
	}
	h[m.Index] = &segmentCalls{last: m.LastTime, ids: ids}
	for i, sc := range h {
		if sc.last.Before(since.Add(-holdsKept)) {
			delete(h, i)
		}
	}
}

// oldest returns stream's cached first message time.
func (a *archived) oldest(stream jetstream.Stream) *oldest {
	name := stream.CachedInfo().Config.Name
	a.mu.Lock()
	defer a.mu.Unlock()
	o := a.firsts[name]
	if o == nil {
		o = &oldest{}
		a.firsts[name] = o
	}
	return o
}

// cachedSegments bounds the archive segments of one stream a Source
// holds in memory (each at most archive.Config.MaxSegmentMessages).
const cachedSegments = 3

// loadedSegment is one archived segment's messages by call id (the last
// token of their subject).
type loadedSegment struct {
	index  uint64
	ready  chan struct{}
	err    error
	byCall map[string][]*archive.Message
}

// resultSlack is how long after a call's deadline its result may still be
// stored (by the reaper, or a dead-lettering): the archive is searched
// that far.
const resultSlack = time.Hour

// callLookup says which archived messages of one call to read: the
// messages of stream on subjects matching filter, stored in [since,
// until) with a sequence below before (0 = any).
type callLookup struct {
	stream, filter, callID string
	since, until           time.Time
	before                 uint64
	// end, when it points at a time set, is when the call ended (its
	// result's stored time): the search stops resultSlack after it.
	end *time.Time
}

// each hands fn the archived messages of q, oldest first, until fn
// returns false, or until a segment starts resultSlack after *q.end
// once that is set (the call has ended: its result is found). Segments
// are loaded whole (one read each), the last few are kept, and a segment
// known to hold none of the call's messages is skipped (holds), so a run
// over archived calls reads each segment about once.
func (a *archived) each(ctx context.Context, q callLookup, fn func(*archive.Message) bool) error {
	segs, err := a.r.Segments(ctx, q.stream)
	if err != nil {
		return fmt.Errorf("audit: archive: %w", err)
	}
	for _, m := range segs {
		if m.Messages == 0 || m.LastTime.Before(q.since) || !m.FirstTime.Before(q.until) {
			continue
		}
		if (q.before != 0 && m.FirstSeq >= q.before) || (q.end != nil && !q.end.IsZero() && !m.FirstTime.Before(q.end.Add(resultSlack))) {
			return nil
		}
		if a.lacks(q.stream, m, q.callID) {
			continue
		}
		seg, err := a.segment(ctx, q.stream, m)
		if err != nil {
			return err
		}
		a.remember(q.stream, m, seg, q.since)
		for _, msg := range seg.byCall[q.callID] {
			if q.before != 0 && msg.Seq >= q.before {
				return nil
			}
			if bus.SubjectMatches(q.filter, msg.Subject) && !fn(msg) {
				return nil
			}
		}
	}
	return nil
}

// segment returns m's messages by call id, loading them once.
func (a *archived) segment(ctx context.Context, stream string, m *archive.Manifest) (*loadedSegment, error) {
	a.mu.Lock()
	for _, s := range a.cache[stream] {
		if s.index == m.Index {
			a.mu.Unlock()
			select {
			case <-s.ready:
				return s, s.err
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
	}
	s := &loadedSegment{index: m.Index, ready: make(chan struct{}), byCall: map[string][]*archive.Message{}}
	list := append(a.cache[stream], s)
	if len(list) > cachedSegments {
		list = list[len(list)-cachedSegments:]
	}
	a.cache[stream] = list
	a.mu.Unlock()
	a.loads.Add(1)
	s.err = a.r.Each(ctx, stream, archive.Query{FromSeq: m.FromSeq, ToSeq: m.ToSeq}, func(msg *archive.Message) bool {
		id := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
		s.byCall[id] = append(s.byCall[id], msg)
		return true
	})
	if s.err != nil {
		s.err = fmt.Errorf("audit: archive: %w", s.err)
		a.forget(stream, s)
	}
	close(s.ready)
	return s, s.err
}

// forget drops a segment that failed to load, so a later lookup tries
// again.
func (a *archived) forget(stream string, s *loadedSegment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.cache[stream]
	for i, x := range list {
		if x == s {
			a.cache[stream] = append(list[:i:i], list[i+1:]...)
			return
		}
	}
}

// rawOf is an archived message as a stream message, for the checks a
// live one goes through.
func rawOf(m *archive.Message) *jetstream.RawStreamMsg {
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Header: m.Header, Data: m.Data, Time: m.Time}
}

// liveFirst returns the first sequence stream holds now.
func liveFirst(ctx context.Context, stream jetstream.Stream) (uint64, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("audit: %s: %w", stream.CachedInfo().Config.Name, err)
	}
	return info.State.FirstSeq, nil
}

// resultHorizon bounds the search for a result in the archive when its
// call has no deadline: as archive.Reader.ResultHorizon's default.
const resultHorizon = 720 * time.Hour

// oldest is the time of a stream's first message, looked up at most once
// a second: a call admitted well after it has all its results and events
// in the live stream, and the archive is not read for it.
type oldest struct {
	mu      sync.Mutex
	checked time.Time
	first   time.Time
}

// staleness is how far behind the stream a cached first time may be.
const staleness = time.Minute

func (o *oldest) before(ctx context.Context, stream jetstream.Stream, t time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if time.Since(o.checked) > time.Second {
		if info, err := stream.Info(ctx); err == nil {
			o.checked, o.first = time.Now(), info.State.FirstTime
			if info.State.Msgs == 0 {
				o.first = time.Now()
			}
		}
	}
	return o.checked.IsZero() || !t.After(o.first.Add(staleness))
}

// archivedOfCall hands fn the archived messages of a call on stream
// (results or events) that the live stream no longer holds, oldest first,
// until fn returns false: those stored since the call's admission (a
// minute's leeway for clocks) and until its deadline and resultSlack
// (resultHorizon without a deadline), with a sequence below the stream's
// first; once the call has ended (j.end: its result found), until
// resultSlack after that. Nothing without an archive, or for a call
// admitted after the live stream's first message.
func (s *Source) archivedOfCall(ctx context.Context, j *job, stream jetstream.Stream, filter string, fn func(*jetstream.RawStreamMsg) bool) error {
	since := searchFrom(j.call, j.rec.Time)
	if s.arch == nil || !s.arch.oldest(stream).before(ctx, stream, since) {
		return nil
	}
	first, err := liveFirst(ctx, stream)
	if err != nil {
		return err
	}
	q := callLookup{stream: stream.CachedInfo().Config.Name, filter: filter, callID: j.call.CallId,
		since: since, until: j.rec.Time.Add(resultHorizon), before: first, end: &j.end}
	if d := j.call.GetDeadline(); d != nil && d.AsTime().After(j.rec.Time) {
		q.until = d.AsTime().Add(resultSlack)
	}
	return s.arch.each(ctx, q, func(m *archive.Message) bool { return fn(rawOf(m)) })
}

// searchFrom is when the archive search for the messages of call, stored
// in the calls stream at stored, starts: a minute before it, or, for a
// call that waited for an approval (approval_id), a minute before its id
// was minted when that is earlier — the call is stored when it was
// approved, and its AWAITING_APPROVAL when it was parked — but never more
// than resultHorizon before it (an id's time is the minter's clock).
func searchFrom(call *toolwirev1.ToolCall, stored time.Time) time.Time {
	from := stored
	if call.GetApprovalId() != "" {
		if id, err := ulid.ParseStrict(call.GetCallId()); err == nil {
			if minted := ulid.Time(id.Time()).UTC(); minted.Before(from) {
				from = minted
			}
			if floor := stored.Add(-resultHorizon); from.Before(floor) {
				from = floor
			}
		}
	}
	return from.Add(-time.Minute)
}

// verifyArchive verifies the archive's chains of the calls, results and
// events streams (archive.Verify) and adds every problem, and every
// manifest signer that is not an enrolled dispatcher's key, as an
// anomaly of kind "archive".
func (s *Source) verifyArchive(ctx context.Context, sum *Summary) error {
	if s.arch == nil {
		return nil
	}
	for _, st := range []jetstream.Stream{s.calls, s.results, s.events} {
		name := st.CachedInfo().Config.Name
		rep, err := archive.Verify(ctx, s.arch.store, name, archive.VerifyOptions{})
		if err != nil {
			return fmt.Errorf("audit: verify archive: %w", err)
		}
		for _, p := range rep.Problems {
			sum.addAnomaly(Anomaly{Kind: "archive", Detail: fmt.Sprintf("%s segment %d: %s: %s", name, p.Index, p.Kind, p.Detail)})
		}
		for _, signer := range rep.Signers {
			_, err := s.registry.Get(ctx, signing.DispatcherKey(signer))
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
				sum.addAnomaly(Anomaly{Kind: "archive", Detail: fmt.Sprintf("%s: segments signed by %s, which is no enrolled dispatcher's key", name, signer)})
			case err != nil:
				return fmt.Errorf("audit: verify archive: enrolment of %s: %w", signer, err)
			}
		}
		sum.ArchiveSegments += rep.Segments
	}
	return nil
}

// eachArchived hands visit the archived messages of stream after
// sequence covered up to to (as far as the archive holds them) and
// within f's time range, until visit reports done or fails. It returns
// the sequence read up to (covered when the archive holds nothing past
// it), for the caller to mark covered when not done: the end of the last
// segment that begins by to, so that sequences missing from the archive
// at the end of the range (a lost segment, with later ones archived)
// are not counted as read and the next read finds them missing. Without
// an archive it reads nothing.
func (s *Source) eachArchived(ctx context.Context, stream string, covered, to uint64, f Filter,
	visit func(*archive.Message) (bool, error)) (upto uint64, done bool, err error) {
	a := s.arch
	if a == nil || to <= covered {
		return covered, false, nil
	}
	segs, err := a.r.Segments(ctx, stream)
	if err != nil {
		return covered, false, fmt.Errorf("audit: archive: %w", err)
	}
	if len(segs) == 0 {
		return covered, false, nil
	}
	reach := covered
	for _, sg := range segs {
		if sg.FromSeq <= to {
			reach = max(reach, min(sg.ToSeq, to))
		}
	}
	if reach == covered {
		return covered, false, nil
	}
	to = reach
	q := archive.Query{FromSeq: covered + 1, ToSeq: to, Since: f.Since}
	if !f.Until.IsZero() {
		q.Until = f.Until.Add(time.Nanosecond) // Until is inclusive here, exclusive there
	}
	var visitErr error
	err = a.r.Each(ctx, stream, q, func(m *archive.Message) bool {
		done, visitErr = visit(m)
		return !done && visitErr == nil
	})
	switch {
	case err != nil:
		return covered, false, fmt.Errorf("audit: archive: %w", err)
	case visitErr != nil || done:
		return covered, done, visitErr
	}
	return max(covered, to), false, nil
}
