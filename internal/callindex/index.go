package callindex

import (
	"bytes"

	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/audit"

	"github.com/oklog/ulid/v2"
)

// Limits and defaults of the calls index.
const (
	// DefaultMax is how many calls an Index keeps when Config.Max is 0.
	DefaultMax = 1_000_000
	// DefaultQueryLimit and MaxQueryLimit bound Query.Limit.
	DefaultQueryLimit = 50
	MaxQueryLimit     = 500
	// MatchedCap is where Query stops counting matches of a filtered
	// query: a matched count of MatchedCap means "MatchedCap or more".
	MatchedCap = 10_000
	// MaxSubscribers is how many live subscriptions an Index serves at once.
	MaxSubscribers = 256
	// SubscriberBuffer is how many live updates wait for a subscriber;
	// past it, updates are dropped for that subscriber.
	SubscriberBuffer = 256
	// DefaultMaxRefusals is how many refused calls an Index keeps when
	// Config.MaxRefusals is 0.
	DefaultMaxRefusals = 100_000
	// MaxReasonBytes is how much of a refusal's reason the index keeps.
	MaxReasonBytes = 256
	// TimeSlack is how far stored times may go backwards along the
	// sequence (clock skew between cluster nodes) for time filters still
	// to find every call.
	TimeSlack = time.Minute
)

// Internal bounds (see the package notes).
const (
	searchTextMax  = 255     // bytes of search text a call keeps
	resultTextMin  = 96      // bytes of result text kept however long the arguments are
	resultTextScan = 4 << 10 // bytes of result text read and redacted
	maxOrphans     = 4096    // results waiting for their call
	maxHeldSecrets = 16384   // calls whose secrets wait for their result
	// Byte budgets of the same (estimated from the bytes they hold), so
	// that large arguments or results cannot make them grow past a
	// bound: the oldest go first, as past the counts.
	maxOrphanBytes = 16 << 20
	maxHeldBytes   = 64 << 20
	maxSpecs       = 4096 // spec versions whose redaction plan is cached
	slabBits       = 20   // 1 MiB arena slabs
	slabSize       = 1 << slabBits
	textSep        = 0 // between argument and result text; never in either
	fetchBatch     = 1024
	fetchMaxBytes  = 16 << 20
	consumeMaxByte = 32 << 20
	specTimeout    = 5 * time.Second
	specRetry      = 30 * time.Second
	cleanupTimeout = 5 * time.Second
)

// Entry is one call as the calls page lists it.
type Entry struct {
	ID                           string    // call id (ULID)
	Seq                          uint64    // CALLS stream sequence of the call
	Time                         time.Time // admitted (stored), UTC
	Tenant, Agent, Session, Tool string
	// Outcome is one of audit's OutcomePending, OutcomeOK, OutcomeError,
	// OutcomeCancelled, OutcomeExpired and OutcomeDeadLettered, or
	// OutcomeRejected for a call admission refused (Refused): its Seq is
	// then the sequence of its REJECTED event in the EVENTS stream, its
	// Time that event's.
	Outcome string
	// ErrorType is the failure's type name ("TIMEOUT") for calls that did
	// not succeed, "" otherwise.
	ErrorType string
	// Duration is the response's execution time (microseconds; whole
	// milliseconds from 35 minutes up, at most 24 days), 0 while pending.
	Duration time.Duration
	// Worker is the worker that answered; "" while pending and for
	// answers of a dispatcher.
	Worker string
	// Reason is a refused call's reason (the refusal's message, cut to
	// MaxReasonBytes); "" for every other call.
	Reason string
}

// Refused reports whether e is a call admission refused (its REJECTED
// event; Seq is that event's EVENTS sequence).
func (e Entry) Refused() bool { return e.Outcome == audit.OutcomeRejected }

// Stats describes an Index.
type Stats struct {
	// Entries is how many calls are indexed; Max how many are kept.
	Entries, Max int
	// Refused is how many refused calls are indexed; MaxRefused how many
	// are kept.
	Refused, MaxRefused int
	// Bytes is the approximate memory of the index (columns, id table,
	// text arena, symbols).
	Bytes int64
	// Ready reports whether the initial rebuild has caught up with the
	// streams; Rebuild is how long it took (0 before).
	Ready   bool
	Rebuild time.Duration
	// Live reports whether a run of the feed follows the streams now
	// (past its rebuild); false while it rebuilds, between runs and once
	// stopped.
	Live bool
	// Lag is how many messages of CALLS and RESULTS were not read yet, as
	// of the last message read.
	Lag uint64
	// LastSeq is the CALLS sequence of the newest call indexed.
	LastSeq uint64
	// Skipped counts CALLS messages that are no call of the list
	// (undecodable, or an id that is not a ULID).
	Skipped uint64
	// Orphans is how many results wait for their call (at most 4,096; a
	// result of a call older than the index waits until pushed out).
	Orphans int
	// Dropped counts live updates a slow subscriber did not get.
	Dropped uint64
	// Subscribers is how many live subscriptions are open.
	Subscribers int
}

// Index is a bounded in-memory index of the newest calls (see the
// package notes). Its methods are safe for concurrent use; its Feed is its
// one writer.
type Index struct {
	streams Streams
	specs   Specs
	max     int
	log     *slog.Logger

	mu sync.RWMutex
	columns
	head    int // slot of the oldest call once the ring is full (0 before)
	n       int // calls indexed
	lastSeq uint64
	ids     idTable
	syms    symbols
	arena   arena

	ready     chan struct{}
	readyOnce sync.Once
	running   atomic.Bool
	live      atomic.Bool  // Stats.Live
	rebuild   atomic.Int64 // time.Duration
	lag       atomic.Uint64
	skipped   atomic.Uint64
	orphans   atomic.Int64

	subMu   sync.Mutex
	subs    map[*subscriber]struct{}
	dropped atomic.Uint64

	// refused is the ring of the calls admission refused (their REJECTED
	// events), an Index of its own (nil in a refusals ring): same
	// columns, its Seq the EVENTS sequence, the worker column holding the
	// reason.
	refused *Index
	// eventsSeq is the last EVENTS sequence the feed read (a run again
	// reads the refusals from after it).
	eventsSeq atomic.Uint64
}

// New returns an empty index configured by cfg (WithDefaults, then
// Validate: an invalid cfg is refused, naming the field). NewFeed feeds it.
func New(cfg Config) (*Index, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x := newRing(cfg.Max)
	x.streams, x.specs, x.log = cfg.Streams, cfg.Specs, cfg.Logger
	x.refused = newRing(cfg.MaxRefusals)
	x.refused.log = cfg.Logger
	return x, nil
}

// newRing returns an empty ring of at most max calls.
func newRing(max int) *Index {
	return &Index{max: max, ready: make(chan struct{}), syms: newSymbols(), subs: map[*subscriber]struct{}{}}
}

// Ready returns a channel closed once the initial rebuild has caught up
// with the streams (the calls and results stored when the feed started).
func (x *Index) Ready() <-chan struct{} { return x.ready }

// Stats describes the index now.
func (x *Index) Stats() Stats {
	x.subMu.Lock()
	subs := len(x.subs)
	x.subMu.Unlock()
	x.mu.RLock()
	s := Stats{Entries: x.n, Max: x.max, LastSeq: x.lastSeq,
		Bytes: int64(cap(x.seq))*slotBytes + int64(len(x.ids.slots))*4 + x.arena.bytes() + x.syms.bytes()}
	x.mu.RUnlock()
	select {
	case <-x.ready:
		s.Ready = true
	default:
	}
	s.Rebuild = time.Duration(x.rebuild.Load())
	s.Lag, s.Skipped, s.Dropped, s.Subscribers = x.lag.Load(), x.skipped.Load(), x.dropped.Load(), subs
	s.Orphans, s.Live = int(x.orphans.Load()), x.live.Load()
	if r := x.refused; r != nil {
		r.mu.RLock()
		s.Refused, s.MaxRefused = r.n, r.max
		s.Bytes += int64(cap(r.seq))*slotBytes + int64(len(r.ids.slots))*4 + r.arena.bytes() + r.syms.bytes()
		r.mu.RUnlock()
	}
	return s
}

// Add indexes a call that has no secret values, as the feed indexes one
// it reads: e.Seq above every call indexed, e.ID a ULID, args its
// (redacted) arguments' text and result its result's text (nil while it
// has no outcome). It evicts the oldest call when the index is full, and
// reports whether the call was added. The feed is an index's writer; Add
// fills an index that has no streams (the 1M benchmarks' fixture,
// callindextest).
func (x *Index) Add(e Entry, args, result []byte) bool {
	if e.Refused() && x.refused != nil {
		return x.refused.add(e, []byte(e.Reason), nil, false)
	}
	return x.add(e, args, result, false)
}

// add indexes a call (Seq above every call indexed, ID a ULID) with the
// search text of its (redacted) arguments and, if it has an outcome
// already, of its (redacted) result; secret says its result text needs
// secrets the feeder holds. It evicts the oldest call when the index is
// full, and reports whether the call was added. It is the feeder's insert
// path.
func (x *Index) add(e Entry, args, result []byte, secret bool) bool {
	id, err := ulid.ParseStrict(e.ID)
	if err != nil {
		return false
	}
	oc, ok := outcomeCode(e.Outcome)
	if !ok {
		oc = ocPending
	}
	var buf [2 * searchTextMax]byte
	text := compose(buf[:0], lower(nil, args, searchTextMax), lower(nil, result, searchTextMax))
	x.mu.Lock()
	defer x.mu.Unlock()
	if e.Seq <= x.lastSeq || x.ids.find((*[16]byte)(&id), x.id) >= 0 {
		return false
	}
	i := x.newSlot()
	x.seq[i], x.unix[i], x.id[i] = e.Seq, e.Time.UnixNano(), id
	x.tenant[i], x.agent[i], x.session[i], x.tool[i] = x.syms.ref(e.Tenant), x.syms.ref(e.Agent), x.syms.ref(e.Session), x.syms.ref(e.Tool)
	x.worker[i], x.errType[i] = x.syms.ref(e.Worker), x.syms.ref(e.ErrorType)
	if oc == ocRejected {
		x.worker[i] = x.syms.ref(cutReason(e.Reason)) // a refusal has no worker
	}
	x.dur[i], x.outcome[i], x.flags[i] = encodeDuration(e.Duration), oc, 0
	if secret {
		x.flags[i] = flagSecrets
	}
	x.text[i] = x.arena.put(text)
	x.ids.insert((*[16]byte)(&id), i)
	x.lastSeq = e.Seq
	return true
}

// outcomeUpdate is what a result sets on its call.
type outcomeUpdate struct {
	outcome, errType, worker string
	dur                      time.Duration
	// keepText keeps the call's result text as it is (a result read
	// again whose secrets are no longer held: the text indexed before
	// was redacted then).
	keepText bool
}

// callOf reports whether the call id is indexed and whether its result
// text needs held secrets.
func (x *Index) callOf(id *[16]byte) (found, secret bool, tool string) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := x.ids.find(id, x.id)
	if i < 0 {
		return false, false, ""
	}
	return true, x.flags[i]&flagSecrets != 0, x.syms.names[x.tool[i]]
}

// setOutcome records a call's result and its (redacted) result text (the
// text it has, with u.keepText); it reports whether the call is indexed.
func (x *Index) setOutcome(id *[16]byte, u outcomeUpdate, result []byte) bool {
	oc, ok := outcomeCode(u.outcome)
	if !ok {
		return false
	}
	res := lower(nil, result, searchTextMax)
	x.mu.Lock()
	defer x.mu.Unlock()
	i := x.ids.find(id, x.id)
	if i < 0 {
		return false
	}
	x.syms.unref(x.errType[i])
	x.syms.unref(x.worker[i])
	x.errType[i], x.worker[i] = x.syms.ref(u.errType), x.syms.ref(u.worker)
	x.outcome[i], x.dur[i] = oc, encodeDuration(u.dur)
	if u.keepText {
		return true
	}
	old := x.text[i]
	args := x.arena.get(old)
	if j := bytes.IndexByte(args, textSep); j >= 0 {
		args = args[:j]
	}
	var buf [2 * searchTextMax]byte
	x.text[i] = x.arena.put(compose(buf[:0], args, res))
	x.arena.release(old)
	return true
}

// Get returns the indexed call with the id: an admitted call, else a
// refused one.
func (x *Index) Get(id string) (Entry, bool) {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return Entry{}, false
	}
	if e, ok := x.get(&u); ok || x.refused == nil {
		return e, ok
	}
	return x.refused.get(&u)
}

// get returns the call with the id in this ring.
func (x *Index) get(u *ulid.ULID) (Entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := x.ids.find((*[16]byte)(u), x.id)
	if i < 0 {
		return Entry{}, false
	}
	return x.entry(i), true
}

// entry is the call in slot i.
func (x *Index) entry(i int) Entry {
	n := x.syms.names
	e := Entry{ID: ulid.ULID(x.id[i]).String(), Seq: x.seq[i], Time: time.Unix(0, x.unix[i]).UTC(),
		Tenant: n[x.tenant[i]], Agent: n[x.agent[i]], Session: n[x.session[i]], Tool: n[x.tool[i]],
		Outcome: outcomeNames[x.outcome[i]], ErrorType: n[x.errType[i]], Duration: decodeDuration(x.dur[i]), Worker: n[x.worker[i]]}
	if x.outcome[i] == ocRejected {
		e.Reason, e.Worker = e.Worker, ""
	}
	return e
}

// cutReason cuts a refusal's reason to MaxReasonBytes, at a rune's start.
func cutReason(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	s = s[:MaxReasonBytes]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // part of the rune the cut halved
	}
	return s
}
