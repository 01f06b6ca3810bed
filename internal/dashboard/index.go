package dashboard

// # The calls index
//
// The calls page lists, filters and searches the newest calls without
// reading JetStream for each request: an Index holds the newest Max calls
// (default 1,000,000) in memory, rebuilt from the CALLS and RESULTS streams
// when it starts and kept live by following both. One goroutine (Run)
// writes; any number of readers (HTTP handlers) query under a read lock.
//
// What is indexed, per call: its id (the ULID as 16 bytes), CALLS
// sequence, stored time, tenant, agent, session, tool, outcome, error type,
// worker, duration, and up to 255 bytes of search text. Calls whose id is
// not a ULID, undecodable CALLS messages, retry re-entries (a message whose
// Nats-Msg-Id is not its call id) and replays (shadow subjects; their
// results, on the replay dispatcher's subjects) are not calls of the list
// and are skipped, as audits skip them.
//
// Memory: the fields live in columns (one slice per field, indexed by the
// same ring slot) of 70 bytes a call: sequence 8, time 8, id 16, six
// interned strings 4 each, duration 4, outcome and flags 1 each, search
// text reference 8. Strings that repeat (tenant, agent, session, tool,
// worker, error type) are interned into uint32 symbols with reference
// counts, so a symbol goes when its last call is evicted. Call ids are
// found through an open-addressing table of uint32 slots (8 bytes a call
// at its load factor of at most 1/2). Search texts are copied into 1 MiB
// slabs of one arena, not kept as one Go string per call; a slab is freed
// when no call's text is left in it. At 1,000,000 calls with texts of
// about 95 bytes the whole index takes 178 bytes a call, 170 MiB of heap
// (BenchmarkIndexQuery1M, Memory). The columns grow with the calls
// (doubling, capped at Max) rather than being allocated for Max up front.
//
// Eviction: the columns are a ring of Max slots; the call admitted next
// replaces the oldest, whose id, symbols and text are released.
//
// Rebuild: Run reads CALLS from the sequence that covers the newest Max
// messages (retry re-entries and replays take sequences too, so a little
// fewer than Max calls may be kept), then, with every call of that window
// in place, RESULTS from the oldest indexed call's time less a minute
// (clock skew between the leaders of the two streams) up to its last
// sequence, then closes Ready and follows both streams live with ordered
// consumers. Each call costs two protobuf decodes (call and result) and,
// for the first call of each tool version, one registry read: 25,000 to
// 35,000 calls with their results a second on two cores shared with an
// embedded server (BenchmarkIndexRebuild), so about half a minute for a
// million. A result read before its call (a call admitted while the
// rebuild runs, or delivered first by the live consumers) waits in a
// bounded map of 4,096 orphans until the call is indexed.
//
// Search: a query's Text is a case-insensitive substring of the call's
// search text: the call's arguments as the audit shows them (secret fields
// replaced by [REDACTED], Plan.Arguments), then the result's text (error
// message, text content, or structured output when there is no text
// content) with the call's secret values replaced (Secrets.Bytes; every
// argument value when the spec version is unknown), both lowercased; once
// a result is in, the arguments keep up to 158 bytes so that at least 96
// bytes of result text fit. Search never covers: secret argument values
// (also not where the result repeats them); the arguments of a call whose
// spec version is not in the registry (no argument text is indexed then:
// fail closed); for a call that has secret values, its result text when
// its secrets are no longer held (the feeder holds them for at most 16,384
// calls awaiting their result, within 64 MiB, so after the rebuild of a
// busy installation older such calls have no result text) or when the text was longer than
// 4 KiB (a cut may halve a secret); anything past the 255 bytes;
// identifiers (filters cover them). A secret shorter than redact.MinLen is
// replaced in result text only where it stands quoted, as everywhere in
// the fabric.
//
// Queries scan the columns from the newest call down, comparing interned
// ints (a filter value that names no symbol answers at once), and stop once
// the page is full and MatchedCap matches are counted; a cursor (Before)
// and a time range are found by binary search on the ring, which is in
// CALLS order (stored times are taken to increase with the sequence, to
// within TimeSlack). A rare filter scans every call: about 5 ms a million
// for ints, 30-60 ms with text, where each text is looked at only where
// the needle's rarest byte occurs (BenchmarkIndexQuery1M: p95 of mixed
// queries about 45 ms).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Limits and defaults of the calls index.
const (
	// DefaultIndexCalls is how many calls an Index keeps when NewIndex is
	// given 0 or less.
	DefaultIndexCalls = 1_000_000
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
	// TimeSlack is how far stored times may go backwards along the
	// sequence (clock skew between cluster nodes) for time filters still
	// to find every call.
	TimeSlack = time.Minute
)

// Internal bounds (see the design notes above).
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

// ErrTooManySubscribers is returned by Subscribe when MaxSubscribers
// subscriptions are open.
var ErrTooManySubscribers = errors.New("dashboard: too many live subscriptions")

// errRunning is returned by Run while another Run feeds the index.
var errRunning = errors.New("dashboard: the calls index is already running")

// Entry is one call as the calls page lists it.
type Entry struct {
	ID                           string    // call id (ULID)
	Seq                          uint64    // CALLS stream sequence of the call
	Time                         time.Time // admitted (stored), UTC
	Tenant, Agent, Session, Tool string
	// Outcome is one of audit's OutcomePending, OutcomeOK, OutcomeError,
	// OutcomeCancelled, OutcomeExpired and OutcomeDeadLettered.
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
}

// Query selects calls. Zero fields match everything.
type Query struct {
	// Tenant, Tool, Agent and Session match exactly; Outcome is one of the
	// Entry outcomes; ErrorType matches case-insensitively, with or
	// without the ERROR_TYPE_ prefix.
	Tenant, Tool, Agent, Session, Outcome, ErrorType string
	// Since and Until bound the stored time, both included.
	Since, Until time.Time
	// Text is a case-insensitive substring of the call's search text
	// (redacted arguments and result text; see the package notes).
	Text string
	// Before is a cursor: only calls with Seq < Before (0 = newest).
	Before uint64
	// Limit is the page size: default DefaultQueryLimit, at most
	// MaxQueryLimit.
	Limit int
}

// IndexStats describes an Index.
type IndexStats struct {
	// Entries is how many calls are indexed; Max how many are kept.
	Entries, Max int
	// Bytes is the approximate memory of the index (columns, id table,
	// text arena, symbols).
	Bytes int64
	// Ready reports whether the initial rebuild has caught up with the
	// streams; Rebuild is how long it took (0 before).
	Ready   bool
	Rebuild time.Duration
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

// Outcome codes, stored as one byte a call.
const (
	ocPending uint8 = iota
	ocOK
	ocError
	ocCancelled
	ocExpired
	ocDeadLettered
	ocAny uint8 = 0xff // in a filter: no outcome filter
)

var outcomeNames = [...]string{audit.OutcomePending, audit.OutcomeOK, audit.OutcomeError, audit.OutcomeCancelled,
	audit.OutcomeExpired, audit.OutcomeDeadLettered}

func outcomeCode(name string) (uint8, bool) {
	for i, n := range outcomeNames {
		if n == name {
			return uint8(i), true
		}
	}
	return 0, false
}

// flagSecrets: the call's result text must be redacted with secrets the
// feeder holds for it.
const flagSecrets uint8 = 1

// Index is a bounded in-memory index of the newest calls (see the notes
// at the top of this file). Its methods are safe for concurrent use; Run
// is its one writer.
type Index struct {
	b     *bus.Bus
	specs Specs
	max   int
	log   *slog.Logger

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
	rebuild   atomic.Int64 // time.Duration
	lag       atomic.Uint64
	skipped   atomic.Uint64
	orphans   atomic.Int64

	subMu   sync.Mutex
	subs    map[*subscriber]struct{}
	dropped atomic.Uint64
}

// columns hold the calls, one slice per field, all indexed by ring slot.
type columns struct {
	seq     []uint64
	unix    []int64 // stored time, ns since the epoch
	id      [][16]byte
	tenant  []uint32 // symbols
	agent   []uint32
	session []uint32
	tool    []uint32
	worker  []uint32
	errType []uint32
	dur     []uint32 // encodeDuration
	outcome []uint8
	flags   []uint8
	text    []uint64 // arena reference
}

// slotBytes is the memory of one slot of the columns.
const slotBytes = 8 + 8 + 16 + 6*4 + 4 + 1 + 1 + 8

// resize gives every column the capacity c, keeping the first n slots.
func (c *columns) resize(n, capacity int) {
	c.seq = resized(c.seq, n, capacity)
	c.unix = resized(c.unix, n, capacity)
	c.id = resized(c.id, n, capacity)
	c.tenant = resized(c.tenant, n, capacity)
	c.agent = resized(c.agent, n, capacity)
	c.session = resized(c.session, n, capacity)
	c.tool = resized(c.tool, n, capacity)
	c.worker = resized(c.worker, n, capacity)
	c.errType = resized(c.errType, n, capacity)
	c.dur = resized(c.dur, n, capacity)
	c.outcome = resized(c.outcome, n, capacity)
	c.flags = resized(c.flags, n, capacity)
	c.text = resized(c.text, n, capacity)
}

func resized[T any](s []T, n, capacity int) []T {
	out := make([]T, n, capacity)
	copy(out, s[:n])
	return out
}

// Specs finds a spec version (registry.Store.GetVersion): the index
// redacts a call's arguments with it.
type Specs interface {
	GetVersion(ctx context.Context, name, version string) (*registry.Entry, error)
}

// NewIndex returns an index of the newest max calls (DefaultIndexCalls
// when max <= 0) of the installation b, whose spec versions specs finds;
// Run feeds it.
func NewIndex(b *bus.Bus, specs Specs, max int, log *slog.Logger) *Index {
	if max <= 0 {
		max = DefaultIndexCalls
	}
	if log == nil {
		log = slog.Default()
	}
	return &Index{b: b, specs: specs, max: max, log: log, ready: make(chan struct{}), syms: newSymbols(), subs: map[*subscriber]struct{}{}}
}

// Ready returns a channel closed once the initial rebuild has caught up
// with the streams (the calls and results stored when Run started).
func (x *Index) Ready() <-chan struct{} { return x.ready }

// Stats describes the index now.
func (x *Index) Stats() IndexStats {
	x.subMu.Lock()
	subs := len(x.subs)
	x.subMu.Unlock()
	x.mu.RLock()
	s := IndexStats{Entries: x.n, Max: x.max, LastSeq: x.lastSeq,
		Bytes: int64(cap(x.seq))*slotBytes + int64(len(x.ids.slots))*4 + x.arena.bytes() + x.syms.bytes()}
	x.mu.RUnlock()
	select {
	case <-x.ready:
		s.Ready = true
	default:
	}
	s.Rebuild = time.Duration(x.rebuild.Load())
	s.Lag, s.Skipped, s.Dropped, s.Subscribers = x.lag.Load(), x.skipped.Load(), x.dropped.Load(), subs
	s.Orphans = int(x.orphans.Load())
	return s
}

// slot is the ring slot of the k-th oldest call (0 <= k < n).
func (x *Index) slot(k int) int {
	i := x.head + k
	if i >= len(x.seq) {
		i -= len(x.seq)
	}
	return i
}

// add indexes a call (Seq above every call indexed, ID a ULID) with the
// search text of its (redacted) arguments and, if it has an outcome
// already, of its (redacted) result; secret says its result text needs
// secrets the feeder holds. It evicts the oldest call when the index is
// full, and reports whether the call was added. It is the feeder's insert
// path, and the benchmarks'.
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
	x.dur[i], x.outcome[i], x.flags[i] = encodeDuration(e.Duration), oc, 0
	if secret {
		x.flags[i] = flagSecrets
	}
	x.text[i] = x.arena.put(text)
	x.ids.insert((*[16]byte)(&id), i)
	x.lastSeq = e.Seq
	return true
}

// newSlot returns the slot for a new call: a new one while the ring
// grows, else the oldest call's, which is evicted.
func (x *Index) newSlot() int {
	if x.n < x.max {
		if x.n == cap(x.seq) {
			x.resize(x.n, min(x.max, max(1024, 2*x.n)))
		}
		x.resize0()
		x.n++
		return x.n - 1
	}
	i := x.head
	x.evict(i)
	x.head++
	if x.head == len(x.seq) {
		x.head = 0
	}
	return i
}

// resize0 extends every column by one slot (within its capacity).
func (x *Index) resize0() {
	c := &x.columns
	n := len(c.seq) + 1
	c.seq, c.unix, c.id = c.seq[:n], c.unix[:n], c.id[:n]
	c.tenant, c.agent, c.session, c.tool = c.tenant[:n], c.agent[:n], c.session[:n], c.tool[:n]
	c.worker, c.errType, c.dur = c.worker[:n], c.errType[:n], c.dur[:n]
	c.outcome, c.flags, c.text = c.outcome[:n], c.flags[:n], c.text[:n]
	if 2*n > len(x.ids.slots) {
		x.ids.grow(n, x.id)
	}
}

// evict releases what slot i holds.
func (x *Index) evict(i int) {
	x.ids.remove(&x.id[i], x.id)
	for _, s := range []uint32{x.tenant[i], x.agent[i], x.session[i], x.tool[i], x.worker[i], x.errType[i]} {
		x.syms.unref(s)
	}
	x.arena.release(x.text[i])
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
func (x *Index) callOf(id *[16]byte) (found, secret bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := x.ids.find(id, x.id)
	return i >= 0, i >= 0 && x.flags[i]&flagSecrets != 0
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

// Get returns the indexed call with the id.
func (x *Index) Get(id string) (Entry, bool) {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return Entry{}, false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := x.ids.find((*[16]byte)(&u), x.id)
	if i < 0 {
		return Entry{}, false
	}
	return x.entry(i), true
}

// entry is the call in slot i.
func (x *Index) entry(i int) Entry {
	n := x.syms.names
	return Entry{ID: ulid.ULID(x.id[i]).String(), Seq: x.seq[i], Time: time.Unix(0, x.unix[i]).UTC(),
		Tenant: n[x.tenant[i]], Agent: n[x.agent[i]], Session: n[x.session[i]], Tool: n[x.tool[i]],
		Outcome: outcomeNames[x.outcome[i]], ErrorType: n[x.errType[i]], Duration: decodeDuration(x.dur[i]), Worker: n[x.worker[i]]}
}

// filter is a Query resolved to symbols; a zero symbol does not filter.
type filter struct {
	tenant, agent, session, tool, errType uint32
	outcome                               uint8
	since, until, stop                    int64
	text                                  *needle
}

// needle is a text to search for, anchored at its byte that is rarest in
// the indexed texts: a text is looked at only where that byte occurs
// (one vectorised IndexByte per text for a rare needle).
type needle struct {
	s      []byte
	anchor byte
	at     int // position of anchor in s
}

func newNeedle(s []byte, freq *[256]uint64) *needle {
	n := &needle{s: s}
	for i, c := range s {
		if freq[c] < freq[n.anchor] || i == 0 {
			n.anchor, n.at = c, i
		}
	}
	return n
}

// in reports whether n occurs in t.
func (n *needle) in(t []byte) bool {
	for off := 0; ; {
		j := bytes.IndexByte(t[off:], n.anchor)
		if j < 0 {
			return false
		}
		start := off + j - n.at
		if start >= 0 && start+len(n.s) <= len(t) && bytes.Equal(t[start:start+len(n.s)], n.s) {
			return true
		}
		off += j + 1
	}
}

// Query returns a page of the calls q selects, newest first, the cursor
// of the next page (0 when there is none) and how many calls match at or
// below the cursor: exact when q only has a cursor, otherwise counted up
// to MatchedCap (a count of MatchedCap means "at least").
func (x *Index) Query(q Query) (page []Entry, next uint64, matched int) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultQueryLimit
	}
	limit = min(limit, MaxQueryLimit)
	f := filter{outcome: ocAny, since: math.MinInt64, until: math.MaxInt64, stop: math.MinInt64}
	var text []byte
	if q.Text != "" {
		text = lower(nil, []byte(q.Text), math.MaxInt)
		if len(text) > searchTextMax || bytes.IndexByte(text, textSep) >= 0 {
			return nil, 0, 0
		}
	}
	if q.Outcome != "" {
		oc, ok := outcomeCode(q.Outcome)
		if !ok {
			return nil, 0, 0
		}
		f.outcome = oc
	}
	if !q.Since.IsZero() {
		f.since, f.stop = q.Since.UnixNano(), q.Since.Add(-TimeSlack).UnixNano()
	}
	if !q.Until.IsZero() {
		f.until = q.Until.UnixNano()
	}
	errType := strings.TrimPrefix(strings.ToUpper(q.ErrorType), "ERROR_TYPE_")

	x.mu.RLock()
	defer x.mu.RUnlock()
	if text != nil {
		f.text = newNeedle(text, &x.arena.freq)
	}
	for _, s := range []struct {
		dst  *uint32
		name string
	}{{&f.tenant, q.Tenant}, {&f.agent, q.Agent}, {&f.session, q.Session}, {&f.tool, q.Tool}, {&f.errType, errType}} {
		if s.name == "" {
			continue
		}
		sym, ok := x.syms.ids[s.name]
		if !ok {
			return nil, 0, 0 // no call has it
		}
		*s.dst = sym
	}
	hi := x.n // calls [0, hi) (oldest first) are below the cursor
	if q.Before != 0 {
		hi = sort.Search(x.n, func(k int) bool { return x.seq[x.slot(k)] >= q.Before })
	}
	if !q.Until.IsZero() {
		u := q.Until.Add(TimeSlack).UnixNano()
		hi = sort.Search(hi, func(k int) bool { return x.unix[x.slot(k)] > u })
	}
	if f.text == nil && f.outcome == ocAny && f.tenant|f.agent|f.session|f.tool|f.errType == 0 && q.Since.IsZero() && q.Until.IsZero() {
		for k := hi - 1; k >= 0 && len(page) < limit; k-- {
			page = append(page, x.entry(x.slot(k)))
		}
		if hi > len(page) {
			next = page[len(page)-1].Seq
		}
		return page, next, hi
	}
	st := scanState{limit: limit, page: make([]Entry, 0, min(limit, 64))}
	// The ring's calls [0, hi) in at most two runs of slots.
	a, b := x.head, x.head+hi
	if b > len(x.seq) {
		if !x.scan(0, b-len(x.seq), &f, &st) {
			x.scan(a, len(x.seq), &f, &st)
		}
	} else {
		x.scan(a, b, &f, &st)
	}
	if st.matched > len(st.page) {
		next = st.page[len(st.page)-1].Seq
	}
	return st.page, next, st.matched
}

type scanState struct {
	page    []Entry
	limit   int
	matched int
}

// scan matches the slots [a, b) newest first and reports whether the
// query is done (MatchedCap reached, or past Since).
func (x *Index) scan(a, b int, f *filter, st *scanState) bool {
	tenant, agent, session, tool, errType := x.tenant[:b], x.agent[:b], x.session[:b], x.tool[:b], x.errType[:b]
	outcome, unix, text := x.outcome[:b], x.unix[:b], x.text[:b]
	for i := b - 1; i >= a; i-- {
		if (f.tool != 0 && tool[i] != f.tool) || (f.tenant != 0 && tenant[i] != f.tenant) ||
			(f.outcome != ocAny && outcome[i] != f.outcome) || (f.errType != 0 && errType[i] != f.errType) ||
			(f.agent != 0 && agent[i] != f.agent) || (f.session != 0 && session[i] != f.session) {
			continue
		}
		if t := unix[i]; t < f.since || t > f.until {
			if t < f.stop {
				return true
			}
			continue
		}
		if f.text != nil && !f.text.in(x.arena.get(text[i])) {
			continue
		}
		st.matched++
		if len(st.page) < st.limit {
			st.page = append(st.page, x.entry(i))
		} else if st.matched >= MatchedCap {
			return true
		}
	}
	return false
}

// Subscribe returns a channel of live updates: every call indexed and
// every call whose outcome changes, from Ready on, and a function that
// ends the subscription (idempotent). The channel holds SubscriberBuffer
// updates; updates that find it full are dropped for this subscriber
// (IndexStats.Dropped) so that a slow reader never holds the feeder up.
// The channel is closed when the subscription ends or Run returns. Past
// MaxSubscribers open subscriptions it returns ErrTooManySubscribers.
func (x *Index) Subscribe() (<-chan Entry, func(), error) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	if len(x.subs) >= MaxSubscribers {
		return nil, func() {}, ErrTooManySubscribers
	}
	s := &subscriber{ch: make(chan Entry, SubscriberBuffer)}
	x.subs[s] = struct{}{}
	return s.ch, func() {
		x.subMu.Lock()
		defer x.subMu.Unlock()
		if _, ok := x.subs[s]; ok {
			delete(x.subs, s)
			close(s.ch)
		}
	}, nil
}

type subscriber struct{ ch chan Entry }

// hasSubscribers reports whether anyone listens.
func (x *Index) hasSubscribers() bool {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	return len(x.subs) > 0
}

// publish hands e to every subscriber that has room.
func (x *Index) publish(e Entry) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	for s := range x.subs {
		select {
		case s.ch <- e:
		default:
			x.dropped.Add(1)
		}
	}
}

// closeSubscribers ends every subscription.
func (x *Index) closeSubscribers() {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	for s := range x.subs {
		delete(x.subs, s)
		close(s.ch)
	}
}

// Run feeds the index from the streams until ctx ends: the rebuild (then
// Ready is closed), then live. It returns nil when ctx ends; otherwise the
// error that stopped it, wrapped (a stream that cannot be read, a consumer
// that stopped: its connection closed), after which Run may be called
// again, or an error at once while another Run runs. Live subscriptions
// are closed when it returns.
func (x *Index) Run(ctx context.Context) error {
	if x.b == nil {
		return errors.New("dashboard: the calls index has no bus")
	}
	if !x.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer x.running.Store(false)
	defer x.closeSubscribers()
	f := &feed{x: x, b: x.b, log: x.log, specs: map[string]specInfo{}, held: newFIFO[*redact.Secrets](maxHeldSecrets, maxHeldBytes),
		orphans: newFIFO[orphan](maxOrphans, maxOrphanBytes), shadow: strings.TrimSuffix(x.b.Subjects.AllShadow(), ">")}
	err := f.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// feed is the one writer of an Index while Run runs.
type feed struct {
	x      *Index
	b      *bus.Bus
	log    *slog.Logger
	specs  map[string]specInfo // name@version
	held   *fifo[*redact.Secrets]
	shadow string // prefix of the replays' subjects
	live   bool   // past the rebuild: publish updates

	orphans                     *fifo[orphan]
	callsPending, resultPending uint64
}

// orphan is a result read before its call.
type orphan struct {
	u    outcomeUpdate
	text []byte // raw result text, not redacted yet
	cut  bool
}

type specInfo struct {
	plan    *redact.Plan
	known   bool
	retryAt time.Time // a failed lookup is tried again from then on
}

func (f *feed) run(ctx context.Context) error {
	start := time.Now()
	// RESULTS' last sequence first: a call stored after the CALLS
	// snapshot has its result after this one.
	rinfo, err := f.b.Results.Info(ctx)
	if err != nil {
		return fmt.Errorf("dashboard index: results stream: %w", err)
	}
	results0 := rinfo.State.LastSeq
	callsDone, err := f.rebuildCalls(ctx)
	if err != nil {
		return err
	}
	resultsDone, err := f.rebuildResults(ctx, results0)
	if err != nil {
		return err
	}
	f.x.rebuild.Store(int64(time.Since(start)))
	f.x.readyOnce.Do(func() { close(f.x.ready) })
	f.x.mu.RLock()
	n := f.x.n
	f.x.mu.RUnlock()
	f.log.Debug("calls index rebuilt", "calls", n, "took", time.Since(start))
	f.live = true
	return f.follow(ctx, callsDone+1, resultsDone+1)
}

// rebuildCalls reads CALLS from the window of the newest Max messages up
// to its last sequence, then again up to the new last sequence while
// calls keep coming (a few passes), so that the results read next find
// their calls. It returns the last sequence read up to.
func (f *feed) rebuildCalls(ctx context.Context) (uint64, error) {
	info, err := f.b.Calls.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dashboard index: calls stream: %w", err)
	}
	last := info.State.LastSeq
	from := max(info.State.FirstSeq, 1)
	if last >= uint64(f.x.max) {
		from = max(from, last-uint64(f.x.max)+1)
	}
	if s := f.x.Stats().LastSeq; s >= from { // Run again: resume
		from = s + 1
	}
	for pass := 0; ; pass++ {
		if last >= from {
			cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}
			if err := f.read(ctx, f.b.Calls, cfg, last, last-from+1, f.onCall); err != nil {
				return 0, fmt.Errorf("dashboard index: read calls: %w", err)
			}
		}
		if pass == 4 {
			return last, nil
		}
		info, err := f.b.Calls.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("dashboard index: calls stream: %w", err)
		}
		if info.State.LastSeq <= last {
			return last, nil
		}
		from, last = last+1, info.State.LastSeq
	}
}

// rebuildResults reads RESULTS up to its last sequence: from the oldest
// indexed call's time less TimeSlack, or after results0 when no call is
// indexed. It returns the last sequence read up to.
func (f *feed) rebuildResults(ctx context.Context, results0 uint64) (uint64, error) {
	info, err := f.b.Results.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dashboard index: results stream: %w", err)
	}
	last := info.State.LastSeq
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: results0 + 1}
	f.x.mu.RLock()
	if f.x.n > 0 {
		t := time.Unix(0, f.x.unix[f.x.slot(0)]).Add(-TimeSlack)
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t}
	}
	f.x.mu.RUnlock()
	if cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && last < cfg.OptStartSeq {
		return last, nil
	}
	if err := f.read(ctx, f.b.Results, cfg, last, 1, f.onResult); err != nil {
		return 0, fmt.Errorf("dashboard index: read results: %w", err)
	}
	return last, nil
}

// read hands the messages of stream from cfg's start up to sequence last
// to handle, in order; want is how many to ask for first. It ends at last,
// or when nothing more is pending.
func (f *feed) read(ctx context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last, want uint64,
	handle func(context.Context, jetstream.Msg, *jetstream.MsgMetadata)) error {
	scan, err := bus.NewScan(ctx, stream, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := scan.Close(); err != nil {
			f.log.Debug("calls index scan not deleted; the server removes it when inactive", "err", err)
		}
	}()
	empties := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := scan.Fetch(int(min(want, fetchBatch)), jetstream.FetchMaxWait(time.Second), jetstream.FetchMaxBytes(fetchMaxBytes))
		if err != nil {
			return err
		}
		n, seq, pending, past, berr := 0, uint64(0), uint64(0), false, error(nil)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				berr = cmp.Or(berr, err)
				continue
			}
			n++
			if md.Sequence.Stream > last {
				past = true
			}
			if past || berr != nil {
				continue
			}
			seq, pending = md.Sequence.Stream, md.NumPending
			handle(ctx, m, md)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			berr = cmp.Or(berr, err)
		}
		if berr != nil {
			return berr
		}
		if past || seq >= last {
			return nil
		}
		if n == 0 {
			info, err := scan.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending == 0 {
				return nil
			}
			if empties++; empties > 30 {
				return fmt.Errorf("no progress for 30s with %d messages pending", info.NumPending)
			}
			continue
		}
		empties = 0
		want = max(1, min(pending, last-seq))
	}
}

// delivery is a message of a live consumer.
type delivery struct {
	m       jetstream.Msg
	results bool
}

// follow consumes CALLS from sequence calls and RESULTS from results until
// ctx ends. Both consumers hand their messages to this goroutine, which
// indexes them. Shutdown: the callbacks are released (stop), then each
// consumer is stopped and waited for, then its server consumer deleted.
func (f *feed) follow(ctx context.Context, calls, results uint64) error {
	in := make(chan delivery, 256)
	stop := make(chan struct{})
	type consumer struct {
		stream jetstream.Stream
		cons   jetstream.Consumer
		cc     jetstream.ConsumeContext
		closed <-chan struct{}
	}
	var started []consumer
	defer func() {
		close(stop)
		for _, c := range started {
			c.cc.Stop()
			<-c.closed
			f.deleteConsumer(c.stream, c.cons)
		}
	}()
	for _, s := range []struct {
		stream  jetstream.Stream
		filter  string
		from    uint64
		results bool
	}{{f.b.Calls, f.b.Subjects.AllCalls(), calls, false}, {f.b.Results, "", results, true}} {
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: s.from,
			InactiveThreshold: bus.ScanInactive}
		if s.filter != "" {
			cfg.FilterSubjects = []string{s.filter}
		}
		cons, err := s.stream.OrderedConsumer(ctx, cfg)
		if err != nil {
			return fmt.Errorf("dashboard index: follow: %w", err)
		}
		results := s.results
		cc, err := cons.Consume(func(m jetstream.Msg) {
			select {
			case in <- delivery{m: m, results: results}:
			case <-stop:
			}
		}, jetstream.PullMaxBytes(consumeMaxByte), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.log.Debug("calls index consumer", "err", err)
		}))
		if err != nil {
			f.deleteConsumer(s.stream, cons)
			return fmt.Errorf("dashboard index: follow: %w", err)
		}
		started = append(started, consumer{stream: s.stream, cons: cons, cc: cc, closed: cc.Closed()})
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-started[0].closed:
			return errors.New("dashboard index: the calls consumer stopped")
		case <-started[1].closed:
			return errors.New("dashboard index: the results consumer stopped")
		case d := <-in:
			md, err := d.m.Metadata()
			if err != nil {
				f.log.Debug("calls index: message without metadata", "subject", d.m.Subject(), "err", err)
				continue
			}
			if d.results {
				f.onResult(ctx, d.m, md)
			} else {
				f.onCall(ctx, d.m, md)
			}
		}
	}
}

// deleteConsumer deletes an ordered consumer's current server consumer
// (Stop leaves it until its inactivity threshold).
func (f *feed) deleteConsumer(stream jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := stream.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		f.log.Debug("calls index consumer not deleted; the server removes it when inactive", "consumer", info.Name, "err", err)
	}
}

// lagged records the messages left after md on its stream.
func (f *feed) lagged(md *jetstream.MsgMetadata, results bool) {
	if results {
		f.resultPending = md.NumPending
	} else {
		f.callsPending = md.NumPending
	}
	f.x.lag.Store(f.callsPending + f.resultPending)
}

// onCall indexes a CALLS message.
func (f *feed) onCall(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) {
	f.lagged(md, false)
	call, kind := audit.DecodeCall(m.Subject(), m.Data(), m.Headers().Get(jetstream.MsgIDHeader), f.shadow)
	switch kind {
	case audit.AnUndecodable:
		f.x.skipped.Add(1)
		f.log.Debug("calls index: undecodable call", "seq", md.Sequence.Stream)
		return
	case audit.AReplay, audit.ARetryEntry:
		return // no call of its own
	}
	id, err := ulid.ParseStrict(call.CallId)
	if err != nil {
		f.x.skipped.Add(1)
		return
	}
	plan, known := f.spec(ctx, call.Tool, call.SpecVersion)
	var args []byte
	var sec *redact.Secrets
	if known {
		args, sec = plan.Arguments(call.Arguments), plan.Secrets(call.Arguments)
	} else {
		sec = redact.AllOf(call.Arguments) // no argument text; the result's is redacted of every value
	}
	c := call.GetCaller()
	e := Entry{ID: call.CallId, Seq: md.Sequence.Stream, Time: md.Timestamp, Tenant: c.GetTenant(), Agent: c.GetAgent(),
		Session: c.GetSession(), Tool: call.Tool, Outcome: audit.OutcomePending}
	var result []byte
	key := [16]byte(id)
	o, orphaned := f.orphans.take(key)
	f.x.orphans.Store(int64(len(f.orphans.m)))
	if orphaned {
		e.Outcome, e.ErrorType, e.Worker, e.Duration = o.u.outcome, o.u.errType, o.u.worker, o.u.dur
		result = redactResult(sec, o.text, o.cut)
	}
	if !f.x.add(e, args, result, sec != nil) {
		return
	}
	if sec != nil && !orphaned {
		// The secrets hold about 1.6 times the arguments' bytes.
		f.held.put(key, sec, 2*len(call.Arguments)+64)
	}
	f.published(&key)
}

// onResult records a RESULTS message on its call.
func (f *feed) onResult(_ context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) {
	f.lagged(md, true)
	if replayResult(m.Subject()) {
		return // a replay's, whose call is no call of the list: no orphan
	}
	resp := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(m.Data(), resp); err != nil {
		f.log.Debug("calls index: undecodable result", "seq", md.Sequence.Stream, "err", err)
		return
	}
	id, err := ulid.ParseStrict(resp.CallId)
	if err != nil {
		return
	}
	key := [16]byte(id)
	outcome, errType := audit.Classify(resp)
	u := outcomeUpdate{outcome: outcome, errType: errType, worker: resp.GetMeta().GetWorker(), dur: resp.GetMeta().GetDuration().AsDuration()}
	text, cut := resultText(resp)
	found, secret := f.x.callOf(&key)
	if !found {
		f.orphans.put(key, orphan{u: u, text: text, cut: cut}, len(text)+64)
		f.x.orphans.Store(int64(len(f.orphans.m)))
		return
	}
	if secret {
		sec, ok := f.held.take(key)
		if !ok {
			text, u.keepText = nil, true // its secrets are gone: fail closed
		} else {
			text = redactResult(sec, text, cut)
		}
	}
	if f.x.setOutcome(&key, u, text) {
		f.published(&key)
	}
}

// replayResult reports whether a results subject is a replay's
// (<prefix>.result.<tenant>.replay.<call id>).
func replayResult(subject string) bool {
	i := strings.LastIndexByte(subject, '.')
	return i >= 0 && strings.HasSuffix(subject[:i], "."+bus.ReplayDispatcher)
}

// published hands the call to live subscribers, once past the rebuild.
func (f *feed) published(id *[16]byte) {
	if !f.live || !f.x.hasSubscribers() {
		return
	}
	if e, ok := f.x.Get(ulid.ULID(*id).String()); ok {
		f.x.publish(e)
	}
}

// spec returns the redaction plan of a spec version (nil: nothing is
// secret) and whether the version is known; lookups are cached, failed
// ones for specRetry.
func (f *feed) spec(ctx context.Context, name, version string) (*redact.Plan, bool) {
	key := name + "@" + version
	if s, ok := f.specs[key]; ok && (s.known || s.retryAt.IsZero() || time.Now().Before(s.retryAt)) {
		return s.plan, s.known
	}
	if len(f.specs) >= maxSpecs {
		clear(f.specs)
	}
	info := f.lookup(ctx, name, version)
	f.specs[key] = info
	return info.plan, info.known
}

func (f *feed) lookup(ctx context.Context, name, version string) specInfo {
	if version == "" {
		return specInfo{} // no version to redact by: never indexed
	}
	if f.x.specs == nil {
		return specInfo{retryAt: time.Now().Add(specRetry)}
	}
	ctx, cancel := context.WithTimeout(ctx, specTimeout)
	defer cancel()
	e, err := f.x.specs.GetVersion(ctx, name, version)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return specInfo{} // left the registry: for good
	case err != nil:
		f.log.Debug("calls index: spec lookup failed; no argument text for now", "tool", name, "version", version, "err", err)
		return specInfo{retryAt: time.Now().Add(specRetry)}
	}
	return specInfo{plan: redact.ForSpec(e.Spec), known: true}
}

// resultText is the searchable text of a response, not redacted: its
// error message, its text content, or its structured output when it has
// no text content; at most resultTextScan bytes (cut says it was longer).
func resultText(r *toolwirev1.ToolResponse) (text []byte, cut bool) {
	add := func(s string) {
		if s == "" || cut {
			return
		}
		if len(text) > 0 {
			s = " " + s
		}
		if room := resultTextScan - len(text); len(s) > room {
			s, cut = s[:room], true
		}
		text = append(text, s...)
	}
	add(r.GetError().GetMessage())
	hasText := false
	for _, c := range r.GetContent() {
		if t := c.GetText(); t != nil {
			hasText = true
			add(t.GetText())
		}
	}
	if !hasText {
		add(r.GetStructuredJson())
	}
	return text, cut
}

// redactResult replaces the secret values in a result's text; a text that
// was cut may hold part of a secret, which cannot be found: none then.
func redactResult(sec *redact.Secrets, text []byte, cut bool) []byte {
	if sec == nil {
		return text
	}
	if cut {
		return nil
	}
	return sec.Bytes(text)
}

// lower appends s lowercased to dst, control characters (textSep among
// them) as spaces, up to n bytes (at a character boundary).
func lower(dst, s []byte, n int) []byte {
	ascii := true
	for _, c := range s {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		s = bytes.ToLower(s)
	}
	for i := 0; i < len(s); {
		c, size := s[i], 1
		if c >= utf8.RuneSelf {
			_, size = utf8.DecodeRune(s[i:])
		}
		if len(dst)+size > n {
			break
		}
		switch {
		case c < ' ' || c == 0x7f:
			dst = append(dst, ' ')
		case 'A' <= c && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// compose appends a call's search text to dst: its arguments' text, and
// after textSep its result's text; both lowercased already. Arguments
// keep what leaves resultTextMin bytes of result text.
func compose(dst, args, result []byte) []byte {
	if len(result) == 0 {
		return append(dst, cutAt(args, searchTextMax)...)
	}
	a := cutAt(args, searchTextMax-1-min(len(result), resultTextMin))
	dst = append(dst, a...)
	dst = append(dst, textSep)
	return append(dst, cutAt(result, searchTextMax-1-len(a))...)
}

// cutAt is s cut to at most n bytes at a character boundary.
func cutAt(s []byte, n int) []byte {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// encodeDuration keeps d in 32 bits: microseconds below 2^31 of them
// (35 minutes), whole milliseconds with the top bit set above (up to
// 2^31-1 of them, 24 days).
func encodeDuration(d time.Duration) uint32 {
	switch us := d.Microseconds(); {
	case us <= 0:
		return 0
	case us < 1<<31:
		return uint32(us)
	default:
		return 1<<31 | uint32(min(d.Milliseconds(), 1<<31-1))
	}
}

func decodeDuration(v uint32) time.Duration {
	if v&(1<<31) != 0 {
		return time.Duration(v&^(1<<31)) * time.Millisecond
	}
	return time.Duration(v) * time.Microsecond
}

// idTable finds a call's slot by id: open addressing with linear probing
// over slot+1 (0 = empty), at most half full.
type idTable struct {
	slots []uint32
	mask  uint64
}

func hashID(id *[16]byte) uint64 {
	h := binary.LittleEndian.Uint64(id[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(id[8:])
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

// find returns the slot of id, or -1.
func (t *idTable) find(id *[16]byte, ids [][16]byte) int {
	if len(t.slots) == 0 {
		return -1
	}
	for p := hashID(id) & t.mask; ; p = (p + 1) & t.mask {
		s := t.slots[p]
		if s == 0 {
			return -1
		}
		if ids[s-1] == *id {
			return int(s - 1)
		}
	}
}

func (t *idTable) insert(id *[16]byte, slot int) {
	p := hashID(id) & t.mask
	for t.slots[p] != 0 {
		p = (p + 1) & t.mask
	}
	t.slots[p] = uint32(slot + 1)
}

// remove deletes id, shifting back the entries that probed past it.
func (t *idTable) remove(id *[16]byte, ids [][16]byte) {
	p := hashID(id) & t.mask
	for {
		s := t.slots[p]
		if s == 0 {
			return
		}
		if ids[s-1] == *id {
			break
		}
		p = (p + 1) & t.mask
	}
	for q := p; ; {
		q = (q + 1) & t.mask
		s := t.slots[q]
		if s == 0 {
			break
		}
		home := hashID(&ids[s-1]) & t.mask
		// The entry at q stays when its home lies cyclically in (p, q].
		if (p < q && p < home && home <= q) || (p > q && (home > p || home <= q)) {
			continue
		}
		t.slots[p] = s
		p = q
	}
	t.slots[p] = 0
}

// grow makes room for at least n ids (the slots [0, n) of ids, all live
// but the last, which is being filled).
func (t *idTable) grow(n int, ids [][16]byte) {
	size := 1024
	for size < 2*n {
		size *= 2
	}
	old := t.slots
	t.slots, t.mask = make([]uint32, size), uint64(size-1)
	for _, s := range old {
		if s != 0 {
			t.insert(&ids[s-1], int(s-1))
		}
	}
}

// symbols interns strings into uint32s with reference counts; 0 is "".
type symbols struct {
	ids   map[string]uint32
	names []string
	refs  []uint32
	free  []uint32
	size  int64 // bytes of the names
}

func newSymbols() symbols {
	return symbols{ids: map[string]uint32{}, names: []string{""}, refs: []uint32{0}}
}

func (s *symbols) ref(name string) uint32 {
	if name == "" {
		return 0
	}
	if id, ok := s.ids[name]; ok {
		s.refs[id]++
		return id
	}
	name = strings.Clone(name)
	var id uint32
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
		s.names[id], s.refs[id] = name, 1
	} else {
		id = uint32(len(s.names))
		s.names, s.refs = append(s.names, name), append(s.refs, 1)
	}
	s.ids[name] = id
	s.size += int64(len(name))
	return id
}

func (s *symbols) unref(id uint32) {
	if id == 0 {
		return
	}
	if s.refs[id]--; s.refs[id] == 0 {
		s.size -= int64(len(s.names[id]))
		delete(s.ids, s.names[id])
		s.names[id] = ""
		s.free = append(s.free, id)
	}
}

// bytes is the approximate memory of the symbols: names, the map (about
// 48 bytes an entry) and the slices.
func (s *symbols) bytes() int64 {
	return s.size + int64(len(s.ids))*48 + int64(cap(s.names))*16 + int64(cap(s.refs)+cap(s.free))*4
}

// arena holds the search texts in slabs of slabSize bytes. A reference is
// slab number << 28 | offset << 8 | length; 0 is no text.
type arena struct {
	slabs [][]byte // slab base+i; nil once released
	live  []int32  // texts in each slab
	base  uint64
	// freq counts the bytes of every text put (never decreased: an
	// approximation that only chooses where search looks first).
	freq [256]uint64
}

func (a *arena) put(t []byte) uint64 {
	if len(t) == 0 {
		return 0
	}
	last := len(a.slabs) - 1
	if last < 0 || len(a.slabs[last])+len(t) > slabSize {
		if len(a.slabs) == 0 {
			a.base = max(a.base, 1) // slab 0 would make the reference 0 ambiguous
		}
		a.slabs, a.live = append(a.slabs, make([]byte, 0, slabSize)), append(a.live, 0)
		if last >= 0 && a.live[last] == 0 { // its texts went while it was filled
			a.free(last)
		}
		last = len(a.slabs) - 1
	}
	off := len(a.slabs[last])
	a.slabs[last] = append(a.slabs[last], t...)
	for _, c := range t {
		a.freq[c]++
	}
	a.live[last]++
	return (a.base+uint64(last))<<28 | uint64(off)<<8 | uint64(len(t))
}

func (a *arena) get(ref uint64) []byte {
	if ref == 0 {
		return nil
	}
	off := int(ref >> 8 & (slabSize - 1))
	return a.slabs[ref>>28-a.base][off : off+int(ref&0xff)]
}

// release drops a reference; a slab with no text left is freed, unless it
// is the one being filled (then put frees it when it starts the next).
func (a *arena) release(ref uint64) {
	if ref == 0 {
		return
	}
	i := int(ref>>28 - a.base)
	if a.live[i]--; a.live[i] > 0 || i == len(a.slabs)-1 {
		return
	}
	a.free(i)
}

// free frees slab i, which holds no text, and forgets the freed slabs
// before the first one kept.
func (a *arena) free(i int) {
	a.slabs[i] = nil
	n := 0
	for n < len(a.slabs)-1 && a.slabs[n] == nil {
		n++
	}
	if n > 0 {
		a.slabs, a.live, a.base = slices.Clone(a.slabs[n:]), slices.Clone(a.live[n:]), a.base+uint64(n)
	}
}

func (a *arena) bytes() int64 {
	n := int64(0)
	for _, s := range a.slabs {
		n += int64(cap(s))
	}
	return n + int64(cap(a.slabs))*24 + int64(cap(a.live))*4
}

// fifo is a map bounded to n entries and to a total weight (bytes held)
// of maxW: the oldest go when a new one comes.
type fifo[V any] struct {
	m     map[[16]byte]fifoItem[V]
	order [][16]byte
	gen   []uint64
	next  uint64
	n     int
	w     int // the weight of the entries in m
	maxW  int
}

type fifoItem[V any] struct {
	v   V
	gen uint64
	w   int
}

func newFIFO[V any](n, maxW int) *fifo[V] {
	return &fifo[V]{m: map[[16]byte]fifoItem[V]{}, n: n, maxW: maxW}
}

// put adds v under k with weight w (an entry heavier than the whole
// budget is not kept).
func (f *fifo[V]) put(k [16]byte, v V, w int) {
	if w > f.maxW {
		return
	}
	if old, ok := f.m[k]; ok {
		delete(f.m, k)
		f.w -= old.w
	}
	for (len(f.m) >= f.n || f.w+w > f.maxW) && len(f.order) > 0 {
		k0, g0 := f.order[0], f.gen[0]
		f.order, f.gen = f.order[1:], f.gen[1:]
		if it, ok := f.m[k0]; ok && it.gen == g0 {
			delete(f.m, k0)
			f.w -= it.w
		}
	}
	f.next++
	f.m[k] = fifoItem[V]{v: v, gen: f.next, w: w}
	f.w += w
	f.order, f.gen = append(f.order, k), append(f.gen, f.next)
	if len(f.order) > 2*f.n+64 { // drop the keys taken meanwhile
		order, gen := make([][16]byte, 0, len(f.m)), make([]uint64, 0, len(f.m))
		for i, k := range f.order {
			if it, ok := f.m[k]; ok && it.gen == f.gen[i] {
				order, gen = append(order, k), append(gen, f.gen[i])
			}
		}
		f.order, f.gen = order, gen
	}
}

func (f *fifo[V]) take(k [16]byte) (V, bool) {
	it, ok := f.m[k]
	if ok {
		delete(f.m, k)
		f.w -= it.w
	}
	return it.v, ok
}
