package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Reader reads the archive: a stream's sealed segments and their
// messages. Manifests are immutable once written, so a Reader caches the
// ones it has read. It lists a stream's segments once, then looks only
// for those sealed since — the manifest of the index after the last one
// known, until there is none: a request when nothing is new, not a
// listing of the whole chain on every read — and lists again at most
// every RelistEvery (a segment removed from the store is seen then).
// It does not check signatures or the chain: Verify does. Safe for
// concurrent use.
type Reader struct {
	// ResultHorizon bounds FindResult: results stored later than this
	// after their call's id was made are not looked for. 0 = 720h.
	ResultHorizon time.Duration
	// OnList, when set, hears each listing of a stream's segments
	// (Segments lists once, then every RelistEvery). Set it before the
	// Reader is used.
	OnList func(stream string)
	// OnRead, when set, hears each segment whose records a read opens
	// (Each, FindResult), before it is read: what a read costs. Set it
	// before the Reader is used.
	OnRead func(m *Manifest)

	b  *blob.Bucket
	mu sync.Mutex
	// manifests caches each stream's manifests read so far, by index.
	manifests map[string]map[uint64]*Manifest
	// lists caches each stream's manifest keys and when they were
	// listed.
	lists map[string]listing
}

// RelistEvery is how often a Reader lists a stream's segments again
// rather than only looking for the next ones.
const RelistEvery = time.Minute

type listing struct {
	keys []indexedKey
	at   time.Time
}

// NewReader returns a Reader of the store b.
func NewReader(b *blob.Bucket) *Reader {
	return &Reader{b: b, manifests: map[string]map[uint64]*Manifest{}, lists: map[string]listing{}}
}

// ErrNotFound is FindResult's answer when the archive holds no result of
// the call.
var ErrNotFound = errors.New("archive: not found")

// Segments returns stream's sealed segments, oldest first.
func (r *Reader) Segments(ctx context.Context, stream string) ([]*Manifest, error) {
	keys, err := r.keys(ctx, stream)
	if err != nil {
		return nil, err
	}
	out := make([]*Manifest, 0, len(keys))
	for _, k := range keys {
		m, err := r.manifest(ctx, stream, k)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (r *Reader) manifest(ctx context.Context, stream string, k indexedKey) (*Manifest, error) {
	r.mu.Lock()
	m := r.manifests[stream][k.index]
	r.mu.Unlock()
	if m != nil {
		return m, nil
	}
	b, err := r.b.ReadAll(ctx, k.key)
	if err != nil {
		return nil, fmt.Errorf("archive: %s: %w", k.key, err)
	}
	m, _, err = decodeManifest(b)
	if err != nil && m == nil {
		return nil, fmt.Errorf("archive: %s: %w", k.key, err)
	}
	r.mu.Lock()
	if r.manifests[stream] == nil {
		r.manifests[stream] = map[uint64]*Manifest{}
	}
	r.manifests[stream][k.index] = m
	r.mu.Unlock()
	return m, nil
}

// keys is stream's manifest keys in index order: listed when not listed
// for RelistEvery, else those known and the ones sealed since (the next
// indexes whose manifests exist).
func (r *Reader) keys(ctx context.Context, stream string) ([]indexedKey, error) {
	r.mu.Lock()
	l, ok := r.lists[stream]
	r.mu.Unlock()
	if !ok || time.Since(l.at) >= RelistEvery {
		if r.OnList != nil {
			r.OnList(stream)
		}
		at := time.Now()
		keys, err := manifestKeys(ctx, r.b, stream)
		if err != nil {
			return nil, err
		}
		l = listing{keys: keys, at: at}
	} else {
		next := uint64(0)
		if n := len(l.keys); n > 0 {
			next = l.keys[n-1].index + 1
		}
		keys := slices.Clip(l.keys)
		for {
			k := manifestKey(stream, next)
			ok, err := r.b.Exists(ctx, k)
			if err != nil {
				return nil, fmt.Errorf("archive: %s: %w", k, err)
			}
			if !ok {
				break
			}
			keys = append(keys, indexedKey{index: next, key: k})
			next++
		}
		l.keys = keys
	}
	r.mu.Lock()
	if cur, ok := r.lists[stream]; !ok || !cur.at.After(l.at) {
		r.lists[stream] = l
	}
	r.mu.Unlock()
	return l.keys, nil
}

type indexedKey struct {
	index uint64
	key   string
}

// manifestKeys lists stream's manifest keys in index order. A directory
// store's listing fails with NotFound when a file it saw is renamed
// before it looks at it (a writer's temporary file becoming a segment):
// the listing is made again, up to listAttempts times.
func manifestKeys(ctx context.Context, b *blob.Bucket, stream string) ([]indexedKey, error) {
	for attempt := 1; ; attempt++ {
		out, err := listManifestKeys(ctx, b, stream)
		if err == nil || gcerrors.Code(err) != gcerrors.NotFound || attempt == listAttempts {
			return out, err
		}
	}
}

// listAttempts bounds the listings of manifestKeys.
const listAttempts = 5

func listManifestKeys(ctx context.Context, b *blob.Bucket, stream string) ([]indexedKey, error) {
	var out []indexedKey
	it := b.List(&blob.ListOptions{Prefix: stream + "/"})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("archive: list %s: %w", stream, err)
		}
		if i, ok := indexOfManifestKey(stream, o.Key); ok {
			out = append(out, indexedKey{index: i, key: o.Key})
		}
	}
	slices.SortFunc(out, func(a, b indexedKey) int { return cmpUint(a.index, b.index) })
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Query selects archived messages: by stream sequence (FromSeq, ToSeq;
// 0 = unbounded), by the time the stream stored them (Since inclusive,
// Until exclusive; zero = unbounded) and by subject (Subject: an exact
// subject, or one ending in ">" for every subject under it; "" = all).
type Query struct {
	FromSeq, ToSeq uint64
	Since, Until   time.Time
	Subject        string
}

func (q Query) overlaps(m *Manifest) bool {
	if m.Messages == 0 {
		return false
	}
	return (q.FromSeq == 0 || m.LastSeq >= q.FromSeq) && (q.ToSeq == 0 || m.FirstSeq <= q.ToSeq) &&
		(q.Since.IsZero() || !m.LastTime.Before(q.Since)) && (q.Until.IsZero() || m.FirstTime.Before(q.Until))
}

func (q Query) matches(m *Message) bool {
	if (q.FromSeq != 0 && m.Seq < q.FromSeq) || (q.ToSeq != 0 && m.Seq > q.ToSeq) ||
		(!q.Since.IsZero() && m.Time.Before(q.Since)) || (!q.Until.IsZero() && !m.Time.Before(q.Until)) {
		return false
	}
	if q.Subject == "" {
		return true
	}
	if p, ok := strings.CutSuffix(q.Subject, ">"); ok {
		return strings.HasPrefix(m.Subject, p)
	}
	return m.Subject == q.Subject
}

// errStop ends a read early without an error.
var errStop = errors.New("archive: stop")

// Each calls fn with every archived message of stream that q selects,
// in stream order, reading only the segments whose ranges overlap q. fn
// returning false stops it.
func (r *Reader) Each(ctx context.Context, stream string, q Query, fn func(*Message) bool) error {
	segs, err := r.Segments(ctx, stream)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if !q.overlaps(s) {
			continue
		}
		if r.OnRead != nil {
			r.OnRead(s)
		}
		_, _, err := readRecords(ctx, r.b, s.Records, func(m *Message) error {
			if q.matches(m) && !fn(m) {
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
	}
	return nil
}

// FindResult returns the first result of callID archived from the
// results stream resultsStream (results are stored on subjects ending in
// the call id). A call id is a ULID: only segments stored since the
// call's time are read, oldest first, so a result found is read from
// the first segment or two. ErrNotFound when the archive holds none.
// The result is returned as stored: the caller checks whether it is
// believed (internal/believed), as for a live one.
func (r *Reader) FindResult(ctx context.Context, resultsStream, callID string) (*Message, error) {
	id, err := ulid.ParseStrict(callID)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a call id", ErrNotFound, callID)
	}
	// A minute's leeway: the id's time is the admitting dispatcher's
	// clock, the stored time the stream leader's.
	since := ulid.Time(id.Time()).Add(-time.Minute)
	var found *Message
	suffix := "." + callID
	until := since.Add(cmp.Or(r.ResultHorizon, 720*time.Hour))
	err = r.Each(ctx, resultsStream, Query{Since: since, Until: until}, func(m *Message) bool {
		if strings.HasSuffix(m.Subject, suffix) {
			found = m
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("%w: no archived result of %s", ErrNotFound, callID)
	}
	return found, nil
}
