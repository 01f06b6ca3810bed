package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures a Store.
type Config struct {
	// Bucket is the limits KV bucket (EnsureBucket creates it). Required.
	Bucket string
	// MaxAttempts is how many read-modify-write attempts one batch makes
	// on a key that other replicas keep changing before it answers
	// ErrContention. Every conflict is another replica's write, so the
	// bucket always makes progress; the bound keeps one batch from waiting
	// for ever behind replicas that keep winning. Default 64.
	MaxAttempts int
	// MaxBatch is how many waiting requests on one key are applied
	// together, in order, in one read and one write. Default 256; 1 = one
	// request per write.
	MaxBatch int
	// Timeout bounds the reads and writes of one batch. Default 5 s.
	Timeout time.Duration
	// Backoff is the upper bound of the random pause after a conflict,
	// which grows with each further conflict of the batch up to 4 times.
	// Default 200 µs. (The pause spreads replicas apart; a longer or
	// doubling one leaves the replica that lost behind the ones that keep
	// writing: measured, 16 attempts doubling from 500 µs gave up now and
	// then with 4 replicas on one key.)
	Backoff time.Duration
	// Cached is how many keys the store remembers the last value it wrote
	// of, so that the next admission on such a key writes at once instead
	// of reading first (one round trip instead of two; a write on a stale
	// value is refused by the server and costs a read). Default 8192;
	// -1 = none.
	Cached int
	// CacheGap is how long after its last write on a key the store may
	// write it again from its cache (see Cached): far more than a round
	// trip to the server, so that other replicas always have time to read
	// and write in between. Default 10 ms.
	CacheGap time.Duration
	// Logger receives Debug lines on conflicts. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxAttempts = 64
	DefaultMaxBatch    = 256
	DefaultTimeout     = 5 * time.Second
	DefaultBackoff     = 200 * time.Microsecond
	DefaultCached      = 8192
	DefaultCacheGap    = 10 * time.Millisecond
)

// WithDefaults returns a copy of c with every zero field set to its
// default.
func (c Config) WithDefaults() Config {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Backoff = cmp.Or(c.Backoff, DefaultBackoff)
	c.Cached = cmp.Or(c.Cached, DefaultCached)
	c.CacheGap = cmp.Or(c.CacheGap, DefaultCacheGap)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Bucket == "":
		return fmt.Errorf("%w: Config.Bucket is empty", ErrInvalid)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: Config.MaxAttempts %d < 1", ErrInvalid, c.MaxAttempts)
	case c.MaxBatch < 1:
		return fmt.Errorf("%w: Config.MaxBatch %d < 1", ErrInvalid, c.MaxBatch)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Config.Timeout %s", ErrInvalid, c.Timeout)
	case c.Backoff <= 0:
		return fmt.Errorf("%w: Config.Backoff %s", ErrInvalid, c.Backoff)
	case c.Cached < -1:
		return fmt.Errorf("%w: Config.Cached %d", ErrInvalid, c.Cached)
	case c.CacheGap < 0:
		return fmt.Errorf("%w: Config.CacheGap %s", ErrInvalid, c.CacheGap)
	}
	return nil
}

// Store counts rates, concurrency slots, budgets and loop-guard runs in
// the limits bucket, shared with every other Store on the bucket. It is
// safe for concurrent use. Close stops it.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	prefix string // "$KV.<bucket>."
	cfg    Config

	ctx    context.Context // cancelled by Close: ends every batch
	cancel context.CancelFunc

	mu     sync.Mutex
	queues map[string]*queue // bucket key → its waiting requests
	cache  map[string]*cached
	closed bool
	wg     sync.WaitGroup // one per running queue

	stats struct {
		requests, batches, reads, writes, conflicts, contention atomic.Uint64
		mostAttempts                                            atomic.Uint64
	}
}

// New returns a Store over the bucket cfg.Bucket, which must exist
// (EnsureBucket).
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("limits: bucket %s: %w", cfg.Bucket, err)
	}
	if !stream.CachedInfo().Config.AllowMsgTTL {
		return nil, fmt.Errorf("limits: bucket %s has no per-key TTLs (create it with EnsureBucket)", cfg.Bucket)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Store{
		js: js, stream: stream, prefix: "$KV." + cfg.Bucket + ".", cfg: cfg,
		ctx: sctx, cancel: cancel, queues: make(map[string]*queue), cache: make(map[string]*cached),
	}, nil
}

// Close stops the store: calls in flight answer ErrClosed (or what their
// batch answered first), later calls answer ErrClosed. It returns once
// every batch has ended. Idempotent.
func (s *Store) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Stats are the store's counters since New.
type Stats struct {
	// Requests is every Allow, Acquire, Renew, Release, Spend and Repeat
	// that reached the bucket.
	Requests uint64
	// Batches is the read-modify-write rounds that answered them: a
	// batch answers every request waiting on one key.
	Batches uint64
	// Reads is the reads of a key before a write or for an answer that
	// writes nothing.
	Reads uint64
	// Writes is the successful writes.
	Writes uint64
	// Conflicts is the writes refused because another replica wrote the
	// key after it was read (each followed by a new read).
	Conflicts uint64
	// Contention is the batches that gave up (ErrContention).
	Contention uint64
	// MostAttempts is the most read-modify-write attempts one batch made.
	MostAttempts uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Requests:     s.stats.requests.Load(),
		Batches:      s.stats.batches.Load(),
		Reads:        s.stats.reads.Load(),
		Writes:       s.stats.writes.Load(),
		Conflicts:    s.stats.conflicts.Load(),
		Contention:   s.stats.contention.Load(),
		MostAttempts: s.stats.mostAttempts.Load(),
	}
}

// state is the decoded value of one key: a machine that requests of one
// kind are applied to in turn.
type state interface {
	// reset loads a stored value; nil means the key is absent (never
	// written, expired, deleted).
	reset(data []byte) error
	// marshal appends the value to store to dst.
	marshal(dst []byte) []byte
	// ttl is how long the stored value must outlive the write: until it no
	// longer changes any answer, by the clock of the latest request.
	ttl() time.Duration
}

// txn is one request's part of a batch.
type txn interface {
	// apply applies the request to st, records its answer in the txn, and
	// reports whether st changed. It is applied again, from a fresh read,
	// when the write conflicts: the answer of the last application is the
	// one given.
	apply(st state) bool
}

// request is a txn waiting in a queue; s.mu guards phase.
type request struct {
	t     txn
	done  chan struct{} // closed once err is set
	err   error
	phase phase
}

type phase uint8

const (
	queued    phase = iota
	taken           // in a batch: its answer will be applied
	abandoned       // its caller left before a batch took it: never applied
)

// queue holds the requests waiting on one key; its goroutine takes them in
// batches until none waits, then ends.
type queue struct {
	newState func() state
	reqs     []*request
}

// do applies t to the state of key (whose kind newState makes) and returns
// once its answer is recorded in t. When ctx ends before t is taken into a
// batch, nothing is applied; when it ends later, t's batch may still be
// applied (as any request whose answer is lost on the way).
func (s *Store) do(ctx context.Context, key string, newState func() state, t txn) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("limits: %w", context.Cause(ctx))
	}
	r := &request{t: t, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	q := s.queues[key]
	if q == nil {
		q = &queue{newState: newState}
		s.queues[key] = q
		s.wg.Add(1)
		go s.run(key, q)
	}
	q.reqs = append(q.reqs, r)
	s.mu.Unlock()
	s.stats.requests.Add(1)

	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if r.phase == queued {
		r.phase = abandoned
		s.mu.Unlock()
		return fmt.Errorf("limits: %w (not applied)", context.Cause(ctx))
	}
	s.mu.Unlock()
	return fmt.Errorf("limits: %w (its batch was under way: it may have been applied)", context.Cause(ctx))
}

// run answers the requests of q in batches until none waits.
func (s *Store) run(key string, q *queue) {
	defer s.wg.Done()
	subject := s.prefix + key
	var buf []byte
	for {
		s.mu.Lock()
		batch := make([]*request, 0, min(len(q.reqs), s.cfg.MaxBatch))
		n := 0
		for _, r := range q.reqs {
			if len(batch) == s.cfg.MaxBatch {
				break
			}
			n++
			if r.phase == queued {
				r.phase = taken
				batch = append(batch, r)
			}
		}
		q.reqs = append(q.reqs[:0], q.reqs[n:]...)
		if len(batch) == 0 {
			delete(s.queues, key)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()

		var err error
		buf, err = s.apply(subject, q.newState(), batch, buf)
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
}

// apply reads the key, applies every request of batch in order, and writes
// the result if it changed, conditional on the revision read; on a
// conflict it pauses (random, growing) and starts again from a fresh read.
// Answers that change nothing (refusals, reads) are decided on a fresh
// read and write nothing.
//
// The first attempt may start from the value this store last wrote
// (cache) instead of a read: the write is conditional on that value's
// revision, so a stale one is refused by the server and only costs the
// read it would have made anyway. A batch that would change nothing on
// the cached value reads before it answers: the cache never decides a
// refusal. The cache serves only keys this store wrote at least CacheGap
// ago and on which it has seen no other writer for cacheRest batches: a
// store that wrote a busy key from its cache in one round trip while the
// other replicas need two (read, write) would win every race and starve
// them (measured: 4 replicas on one key gave up after 16 attempts), and a
// key several replicas write would pay a refused write each time.
func (s *Store) apply(subject string, st state, batch []*request, buf []byte) ([]byte, error) {
	s.stats.batches.Add(1)
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	c := s.cached(subject)
	for attempt := 1; ; {
		var (
			rev   uint64
			data  []byte
			fresh = c == nil || c.rest > 0 || time.Since(c.written) < s.cfg.CacheGap
		)
		if fresh {
			var err error
			rev, data, err = s.read(ctx, subject)
			if err != nil {
				return buf, s.failed(err)
			}
			s.stats.reads.Add(1)
			if c != nil && rev != c.rev {
				c.rest = cacheRest // another replica wrote it
			}
		} else {
			rev, data = c.rev, c.data
		}
		if err := st.reset(data); err != nil {
			return buf, fmt.Errorf("%w: %s: %w", ErrCorrupt, subject, err)
		}
		changed := false
		for _, r := range batch {
			if r.t.apply(st) {
				changed = true
			}
		}
		if !changed {
			if !fresh {
				c.rest = 1 // decide on a read
				continue
			}
			return buf, nil
		}
		buf = st.marshal(buf[:0])
		seq, err := s.write(ctx, subject, buf, rev, st.ttl())
		if fresh {
			for n := uint64(attempt); ; {
				m := s.stats.mostAttempts.Load()
				if n <= m || s.stats.mostAttempts.CompareAndSwap(m, n) {
					break
				}
			}
		}
		if err == nil {
			s.stats.writes.Add(1)
			s.remember(subject, c, seq, buf)
			return buf, nil
		}
		if !conflict(err) {
			s.forget(subject)
			return buf, s.failed(err)
		}
		s.stats.conflicts.Add(1)
		if !fresh {
			c.rest = cacheRest
			continue
		}
		if attempt == s.cfg.MaxAttempts {
			s.stats.contention.Add(1)
			s.cfg.Logger.Debug("limits: giving up on a contended key", "subject", subject, "attempts", attempt)
			return buf, fmt.Errorf("%w: %s after %d attempts", ErrContention, subject, attempt)
		}
		pause := time.Duration(rand.Int64N(int64(s.cfg.Backoff)*int64(min(attempt, 4))) + 1)
		attempt++
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return buf, s.failed(ctx.Err())
		case <-t.C:
		}
	}
}

// cached is the value this store last wrote on a key, and its revision.
type cached struct {
	rev     uint64
	data    []byte
	written time.Time // of the last write by this store
	// rest counts the batches that read first since a write on this value
	// conflicted.
	rest int
}

// maxCachedBytes bounds a cached value (a concurrency key of up to 42
// holders): the cache holds at most Cached × 1 KiB.
const maxCachedBytes = 1024

// cacheRest is how many batches read first after another replica's write
// was seen: a write on a cached value conflicted, or a read found a
// revision this store did not write.
const cacheRest = 8

// cached returns the cache entry of subject, or nil; only its queue's
// goroutine uses an entry.
func (s *Store) cached(subject string) *cached {
	if s.cfg.Cached < 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache[subject]
}

// remember records the value written on subject at seq. c is the entry
// the batch started from, if any.
func (s *Store) remember(subject string, c *cached, seq uint64, data []byte) {
	if s.cfg.Cached < 0 {
		return
	}
	if len(data) > maxCachedBytes {
		if c != nil {
			s.forget(subject)
		}
		return
	}
	if c != nil {
		c.rev, c.data, c.written = seq, append(c.data[:0], data...), time.Now()
		c.rest = max(c.rest-1, 0)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= s.cfg.Cached {
		for k := range s.cache { // any one: the map's order is random
			delete(s.cache, k)
			break
		}
	}
	s.cache[subject] = &cached{rev: seq, data: append([]byte(nil), data...), written: time.Now()}
}

func (s *Store) forget(subject string) {
	s.mu.Lock()
	delete(s.cache, subject)
	s.mu.Unlock()
}

// failed wraps err, saying ErrClosed when the store was closed under it.
func (s *Store) failed(err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("limits: %w", err)
}

// read returns the revision of the key's last message and its value; nil
// for a key never written (revision 0), deleted or expired (the revision of
// the marker).
func (s *Store) read(ctx context.Context, subject string) (uint64, []byte, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", subject, err)
	}
	if op := m.Header.Get("KV-Operation"); op != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return m.Sequence, nil, nil
	}
	if len(m.Data) == 0 {
		return m.Sequence, nil, nil
	}
	return m.Sequence, m.Data, nil
}

// write stores value at subject if its last revision is still rev, to be
// removed by the server after ttl, and returns its revision.
func (s *Store) write(ctx context.Context, subject string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	ttl = max((ttl + time.Second - 1).Truncate(time.Second), time.Second)
	m := &nats.Msg{Subject: subject, Data: value, Header: make(nats.Header, 2)}
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", subject, err)
	}
	return ack.Sequence, nil
}

// conflict reports whether err is a conditional write refused because the
// key changed since it was read (10071; 10164 on replicated streams).
func conflict(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// ttlSlack is added to every key's TTL: the server expires keys by its own
// clock and the states say until when they matter by the dispatchers'
// clocks, so a clock that runs ahead of the server's by less than this
// never loses a count that still matters.
const ttlSlack = 5 * time.Second

// read-only helper for Usage and InFlight: the state of key now.
func (s *Store) load(ctx context.Context, key string, st state) error {
	_, data, err := s.read(ctx, s.prefix+key)
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if err := st.reset(data); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	return nil
}
